// Resolves the ESM-only packages (multiformats, @ipld/*, cborg, ...) through their "import" export condition,
// and everything else as jest normally does. @swc/jest then transforms those files to CommonJS.
const ESM_ONLY = /^(multiformats|@ipld\/[^/]+|cborg|uint8arrays|varint|it-[a-z-]+|p-[a-z-]+)(\/|$)/;

module.exports = (request, options) => {
  if (ESM_ONLY.test(request) || (options.basedir && /node_modules\/(multiformats|@ipld|cborg)\//.test(options.basedir) && !request.startsWith('.'))) {
    try {
      return options.defaultResolver(request, { ...options, conditions: ['import', 'module-sync', 'node', 'default'] });
    } catch {
      // fall through to the default resolution
    }
  }
  return options.defaultResolver(request, options);
};
