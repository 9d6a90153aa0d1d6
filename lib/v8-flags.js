// V8 settings for the serving process, imported by server.js before anything else.
//
// No allocation-site pretenuring. Under load, V8 sees the objects of a request (its pg query and result, the HTTP
// request, the reply) survive young-generation collections while many requests are in flight, and starts
// allocating them straight into the old generation. From then on every such short-lived object needs a full
// mark-compact to die: 40+ of them in 10 s. PostGIS z14, cache off, wrk with 50 connections, server and
// database on 2 shared cores: 192-213 -> 148-164 us of server CPU per tile and no mark-compacts; file tiles
// (koh-samui, warm and cold) unchanged within noise (bench/README.md). The flag is read at each collection, so
// setting it at run time works. `node --allocation-site-pretenuring server.js` still wins (Node refuses the flag in
// NODE_OPTIONS, so the command line is the only other place it can come from).
import v8 from 'node:v8'

const onCommandLine = process.execArgv.some((arg) => /^--(no-?)?allocation[-_]site[-_]pretenuring$/.test(arg))
if (!onCommandLine) v8.setFlagsFromString('--no-allocation-site-pretenuring')
