// The adapter between the SDK and the component's `orca:policy/host@0.3.0` import. Only the
// component entry (component.ts, which `build` bundles into the plugin) imports the host
// interface and installs it here; every other module reaches the host through this file, so
// unit tests load the SDK in plain Node without the component runtime.
import type { InstanceQuery, InstanceType, LogLevel } from './types.js';

/** What the host offers plugins: the functions of `orca:policy/host@0.3.0`. */
export interface HostImports {
  log(level: LogLevel, message: string): void;
  queryInstanceTypes(query: InstanceQuery): InstanceType[];
}

let installed: HostImports | undefined;
const unhostedLog: Array<{ level: LogLevel; message: string }> = [];

/** Installs the host the SDK calls; the component entry does this, tests may pass a fake. */
export function installHost(host: HostImports | undefined): void {
  installed = host;
}

/** The installed host; throws outside a component when no fake was installed. */
export function currentHost(): HostImports {
  if (installed === undefined) {
    throw new Error(
      'orca-plugin: no orca host here (not running as a component): unit tests pass a FixedCatalogue, or installFakeHost() from orca-plugin/testing',
    );
  }
  return installed;
}

/** Writes a line to orca's log, attributed to this plugin (kept in memory outside a host). */
export function log(level: LogLevel, message: string): void {
  if (installed === undefined) {
    unhostedLog.push({ level, message });
  } else {
    installed.log(level, message);
  }
}

/** The lines logged while no host was installed, oldest first; empties the list. */
export function takeUnhostedLog(): Array<{ level: LogLevel; message: string }> {
  return unhostedLog.splice(0, unhostedLog.length);
}
