# tile-cannon: serves every .mbtiles/.pmtiles in the /data volume on port 3000.
#   docker build -t tile-cannon .
#   docker run -p 3000:3000 -v "$PWD/tiles:/data:ro" tile-cannon
# Node 26, the current Active LTS (Node 20 reached its end of life in April 2026); .ci/run tests the same line.
# Bookworm, like the CI machine. Both stages must use the same Node: better-sqlite3 is built for its ABI.
FROM node:26-bookworm-slim AS build
WORKDIR /app
# better-sqlite3 falls back to compiling when no prebuilt binary fits.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM node:26-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production \
    TILE_CANNON_HOST=0.0.0.0 \
    TILE_CANNON_PORT=3000
COPY --from=build /app/node_modules ./node_modules
COPY package.json server.js ./
COPY lib ./lib
COPY routes ./routes
USER node
VOLUME ["/data"]
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=3s CMD ["node", "-e", "fetch('http://127.0.0.1:3000/health').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "server.js", "/data"]
