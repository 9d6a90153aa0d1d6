# tile-cannon: serves every .mbtiles, .pmtiles, .tif/.tiff (COG), .geojson and MosaicJSON/STAC .json in the /data
# volume on port 3000 (TILE_CANNON_PORT); styles and fonts from /styles, /fonts.
#   docker build -t tile-cannon .
#   docker run -p 3000:3000 -v "$PWD/tiles:/data:ro" -v "$PWD/styles:/styles:ro" -v "$PWD/fonts:/fonts:ro" \
#     -e TILE_CANNON_STYLES=/styles -e TILE_CANNON_FONTS=/fonts tile-cannon
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
# The renderer (MapLibre Native through mapli, in a venv): the EGL/GL and curl libraries it loads.
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv libegl1 libegl-mesa0 libgl1 \
      libgl1-mesa-dri libcurl4 && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /app/.render-venv && /app/.render-venv/bin/pip install --no-cache-dir mapli==0.4.1
COPY --from=build /app/node_modules ./node_modules
COPY package.json server.js ./
COPY lib ./lib
COPY routes ./routes
USER node
VOLUME ["/data"]
EXPOSE 3000
# Shell form: the port the server listens on, when -e TILE_CANNON_PORT changes it.
HEALTHCHECK --interval=30s --timeout=3s CMD node -e "fetch('http://127.0.0.1:${TILE_CANNON_PORT:-3000}/health').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"
CMD ["node", "server.js", "/data"]
