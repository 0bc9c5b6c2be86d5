// orca-plugin: the JavaScript/TypeScript SDK for orca policy plugins (orca:policy@0.3.0).
export * from './types.js';
export { PolicyError, isPolicyError, type PolicyErrorKind } from './errors.js';
export {
  definePlugin,
  exportPolicy,
  parseSettings,
  type Plugin,
  type PluginDefinition,
} from './plugin.js';
export {
  anyQuery,
  CatalogueBase,
  compareTypes,
  HostCatalogue,
  hostCatalogue,
  matches,
  toQuery,
  type Catalogue,
  type QueryInput,
} from './catalogue.js';
export { log, installHost, type HostImports } from './host.js';
export { annotation, divCeil, label, memoryMibCeil, nodeSelector, vcpusCeil } from './pod.js';
export { Quantity, QuantityError, type QuantityErrorKind } from './quantity.js';
export { MAX_KEY_LEN, MAX_TAGS, MAX_VALUE_LEN, validateTag } from './tags.js';
