// A variants worker (piscina, lib/variants/index.js): a large tile decoded and made into MLT or GeoJSON here, off the
// event loop. The result's memory is moved back, not copied: a plain Uint8Array that owns its ArrayBuffer (a Buffer's
// may be a shared pool's, which Node refuses to transfer).
import { move } from 'piscina'
import { decodeStored, transcodeLoaded } from './transcode.js'

export default async function makeVariant ({ variant, format, stored, encoding, z, x, y }) {
  const bytes = await transcodeLoaded(variant, format, decodeStored(Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength), encoding), z, x, y)
  const owned = bytes.constructor === Uint8Array && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
  return move(owned ? bytes : new Uint8Array(bytes))
}
