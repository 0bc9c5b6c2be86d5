// team-selector-js: the component's entry. `build` bundles the default export.
import { definePlugin, hostCatalogue } from 'orca-plugin';
import { NAME, parse, select } from './select.js';

export default definePlugin({
  name: NAME,
  version: '0.1.0',
  selectInstance: (pod, settings) => select(pod, parse(settings), hostCatalogue),
});
