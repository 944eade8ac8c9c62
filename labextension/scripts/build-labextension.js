#!/usr/bin/env node
/*
 * Build the prebuilt lab extension with @jupyterlab/builder directly, so the Python
 * build environment needs no JupyterLab (hatch-jupyter-builder only runs npm).
 *
 * `jupyter labextension build .` (jupyter-builder) does the same: it copies the
 * installed @jupyterlab/core-meta's core.package.json into a directory as package.json
 * and passes that directory as --core-path. Without core-meta in node_modules it would
 * try to download it, which fails offline.
 */
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const here = path.resolve(__dirname, '..');
const coreFile = require.resolve('@jupyterlab/core-meta/core.package.json', { paths: [here] });
const coreDir = path.join(here, 'node_modules', '.sdc-magic-core');
fs.mkdirSync(coreDir, { recursive: true });
fs.copyFileSync(coreFile, path.join(coreDir, 'package.json'));

const builder = require.resolve('@jupyterlab/builder/lib/build-labextension.js', { paths: [here] });
const args = [builder, '--core-path', coreDir, ...process.argv.slice(2), here];
const result = spawnSync(process.execPath, args, { cwd: here, stdio: 'inherit' });
if (result.status === 0) {
  // install.json tells `jupyter labextension list` that pip manages this extension; ship it
  // inside the output so the wheel and a `labextension develop` symlink look the same.
  const outputDir = path.resolve(here, require(path.join(here, 'package.json')).jupyterlab.outputDir);
  fs.copyFileSync(path.join(here, '..', 'install.json'), path.join(outputDir, 'install.json'));
}
process.exit(result.status === null ? 1 : result.status);
