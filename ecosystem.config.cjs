// pm2: `pm2 start ecosystem.config.cjs` runs one tile-cannon per core in cluster mode; `pm2 reload tile-cannon`
// replaces them one by one: each new process says 'ready' once it listens (wait_ready), and each old one finishes
// its in-flight requests on SIGINT before exiting (kill_timeout leaves it room).
module.exports = {
  apps: [{
    name: 'tile-cannon',
    script: 'server.js',
    args: process.env.TILE_CANNON_ARGS || './tiles',
    exec_mode: 'cluster',
    instances: process.env.TILE_CANNON_INSTANCES || 'max',
    wait_ready: true,
    listen_timeout: 30000,
    kill_timeout: 12000,
    env: { TILE_CANNON_PORT: 3000 },
  }],
}
