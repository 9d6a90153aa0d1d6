// pm2: `pm2 start ecosystem.config.cjs` runs one tile-cannon per core in cluster mode; `pm2 reload tile-cannon`
// replaces them one by one: each new process says 'ready' once it listens (wait_ready), and each old one finishes
// its in-flight requests on SIGINT before exiting (kill_timeout leaves it room).
// TILE_CANNON_ARGS: the command line (default none: ./tiles when it exists, else the demo, as `node server.js`);
// TILE_CANNON_INSTANCES: how many workers (default one per core); TILE_CANNON_PORT: the port (default 3000).
module.exports = {
  apps: [{
    name: 'tile-cannon',
    script: 'server.js',
    args: process.env.TILE_CANNON_ARGS || '',
    exec_mode: 'cluster',
    instances: process.env.TILE_CANNON_INSTANCES || 'max',
    wait_ready: true,
    listen_timeout: 30000,
    kill_timeout: 12000,
    // Exit 2 is a configuration error (a bad flag, nothing given exists): restarting would fail the same way forever.
    stop_exit_codes: [2],
    env: { TILE_CANNON_PORT: process.env.TILE_CANNON_PORT || 3000 },
  }],
}
