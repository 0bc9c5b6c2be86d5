// The plugin module `build` bundles into the component (an esbuild alias).
declare module 'orca-plugin:entry' {
  const plugin: import('./plugin.js').Plugin;
  export default plugin;
}
