"""A renderer child of tile-cannon: MapLibre Native through the PyPI wheel `mapli`, spoken to over stdin/stdout.

Frames both ways: a 4-byte big-endian length of what follows, a 4-byte length of the JSON header, the JSON header,
then the binary payload (a PNG, a tile). The parent asks for renders; while rendering, MapLibre Native asks for
tiles, glyphs and sprites through the `tc://` scheme, and this child forwards each such request to the parent (which
answers from its own pipeline and cache) and waits for the answer. lib/style/render/pool.js is the other side.
"""
import asyncio
import itertools
import json
import os
import struct
import sys
import threading

# The protocol keeps fd 1 to itself: anything native code prints to stdout (from the import on) goes to stderr.
OUT = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
IN = sys.stdin.buffer

import mapli  # noqa: E402 (after the redirection above)
write_lock = threading.Lock()
waiting = {}  # fetch id -> [Event, header, payload]
fetch_ids = itertools.count(1)
FETCH_TIMEOUT_S = float(os.environ.get("TILE_CANNON_FETCH_TIMEOUT_S", "30"))


def send(header, payload=b""):
    data = json.dumps(header).encode()
    frame = struct.pack(">II", 4 + len(data) + len(payload), len(data)) + data + payload
    with write_lock:
        OUT.write(frame)
        OUT.flush()


def read_frame():
    head = IN.read(4)
    if len(head) < 4:
        return None
    (length,) = struct.unpack(">I", head)
    body = IN.read(length)
    if len(body) < length:
        return None
    (json_length,) = struct.unpack(">I", body[:4])
    return json.loads(body[4 : 4 + json_length]), body[4 + json_length :]


def fetch(request):
    """MapLibre Native asks for a tc:// URL: the parent answers it (called on a MapLibre worker thread)."""
    fid = next(fetch_ids)
    slot = [threading.Event(), None, b""]
    waiting[fid] = slot
    send({"op": "fetch", "fid": fid, "url": request.url, "kind": request.kind})
    if not slot[0].wait(FETCH_TIMEOUT_S):
        waiting.pop(fid, None)
        return mapli.Response.error(mapli.ErrorReason.SERVER, "tile-cannon did not answer in time")
    header, payload = slot[1], slot[2]
    status = header.get("status")
    if status == "ok":
        return mapli.Response(payload)
    if status == "empty":
        return mapli.Response.no_content()
    reason = mapli.ErrorReason.NOT_FOUND if status == "missing" else mapli.ErrorReason.SERVER
    return mapli.Response.error(reason, header.get("message", "failed"))


async def render(pool, msg):
    op = msg["op"]
    if op == "tile":
        return await pool.arender_tile(msg["style"], z=msg["z"], x=msg["x"], y=msg["y"], tile_size=msg["size"], pixel_ratio=msg["ratio"])
    if op == "view":
        return await pool.arender(msg["style"], lon=msg["lon"], lat=msg["lat"], zoom=msg["zoom"], width=msg["width"], height=msg["height"], bearing=msg.get("bearing", 0.0), pitch=msg.get("pitch", 0.0), pixel_ratio=msg["ratio"])
    if op == "bounds":
        return await pool.arender_from_bounds(msg["style"], bbox=tuple(msg["bbox"]), width=msg["width"], height=msg["height"], padding=msg.get("padding", 0.0), bearing=msg.get("bearing", 0.0), pitch=msg.get("pitch", 0.0), pixel_ratio=msg["ratio"])
    raise ValueError("unknown op " + str(op))


async def handle(pool, msg, payload):
    rid = msg.get("rid")
    try:
        if msg["op"] == "style":
            if not pool.has_style(msg["style"]):
                pool.register_style(msg["style"], json=payload.decode())
            send({"op": "done", "rid": rid})
            return
        png = await render(pool, msg)
        send({"op": "done", "rid": rid}, png)
    except Exception as err:  # each failure is one answer; the child lives on
        send({"op": "failed", "rid": rid, "error": type(err).__name__, "message": str(err).split("\n")[0][:500]})


def main():
    mapli.register_scheme_handler("tc", fetch)
    try:
        pool = mapli.RenderPool(workers=int(os.environ.get("TILE_CANNON_RENDER_THREADS", "1")))
    except Exception as err:
        send({"op": "fatal", "error": type(err).__name__, "message": str(err)})
        return 3
    loop = asyncio.new_event_loop()

    def reader():
        while True:
            frame = read_frame()
            if frame is None:
                loop.call_soon_threadsafe(loop.stop)  # the parent went away
                return
            msg, payload = frame
            if msg.get("op") == "resource":
                slot = waiting.pop(msg.get("fid"), None)
                if slot is not None:
                    slot[1], slot[2] = msg, payload
                    slot[0].set()
            else:
                asyncio.run_coroutine_threadsafe(handle(pool, msg, payload), loop)

    threading.Thread(target=reader, daemon=True).start()
    send({"op": "ready", "engine": "mapli " + getattr(mapli, "__version__", "0.4.1"), "pid": os.getpid()})
    loop.run_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
