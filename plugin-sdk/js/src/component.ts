// The component entry `build` bundles: the only module that imports the host interface. It
// installs the host for the SDK, then exports the author's plugin (the module `build` aliases
// as `orca-plugin:entry`) as the world's `policy` interface.
import * as host from 'orca:policy/host@0.3.0';
import plugin from 'orca-plugin:entry';
import { installHost } from './host.js';
import { exportPolicy } from './plugin.js';

installHost(host);

export const policy = exportPolicy(plugin);
