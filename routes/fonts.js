// Glyphs as tileserver-gl serves them: /fonts.json (the font names) and /fonts/:stack/:range.pbf, a comma-separated
// stack merged glyph by glyph (lib/style/glyphs.js). A range no font has is an empty glyph PBF, never an error.
import { BadRequest } from '../lib/errors.js'
import { parseRange } from '../lib/style/glyphs.js'
import { GET_HEAD, metadataValidators } from './http.js'

export default async function fontRoutes (app) {
  const { fonts, metadataValidators: onSend } = app
  // Glyphs change only with the fonts folder: they are as lasting as tiles.
  const glyphValidators = metadataValidators(app.config.cacheControl)

  app.route({ method: GET_HEAD, url: '/fonts.json', onSend, handler: async () => fonts.fonts() })

  app.route({
    method: GET_HEAD,
    url: '/fonts/:stack/:file',
    onSend: glyphValidators,
    handler: async (request, reply) => {
      const { stack, file } = request.params
      const range = file.endsWith('.pbf') ? parseRange(file.slice(0, -4)) : null
      if (range === null) throw new BadRequest('a glyph range is START-END.pbf, START a multiple of 256 and END = START + 255')
      if (stack.length === 0 || stack.length > 512) throw new BadRequest('a font stack is one to 512 characters')
      reply.type('application/x-protobuf')
      return fonts.glyphs(stack, range)
    },
  })
}
