import pino from 'pino';

/** The API's logger: JSON lines on stderr, level names as text, ISO times; ASSAY_LOG_LEVEL sets the level (default info). */
export const apiLogger = pino(
  {
    level: process.env.ASSAY_LOG_LEVEL || 'info',
    base: null,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  },
  process.stderr,
);
