/** Injection tokens of the API's own configuration. */
export const ASSAY_HOME_TOKEN = Symbol('ASSAY_API_HOME');
export const API_CONFIG = Symbol('ASSAY_API_CONFIG');
