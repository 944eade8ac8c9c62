/**
 * sdc_magic for JupyterLab: a disclosure panel, output badges, a status-bar item and an
 * export guard, all from the `metadata.sdc_magic` records the kernel extension writes.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { downloadRedactedCopy, runExport, showText } from './actions';
import { decorate, outputNode } from './badges';
import { ExportGuard } from './guard';
import { effectiveGuard, IOutputInfo, ISummary, needsAttention, statusBarText, versionWarning } from './model';
import { DisclosurePanel, PANEL_ID } from './panel';
import { listenForUpdates, rendererFactory } from './renderer';
import { serverVersion } from './request';
import { NotebookWatcher } from './state';
import { VERSION } from './version';

const PLUGIN_ID = 'sdc-magic:plugin';

export namespace CommandIDs {
  export const downloadRedacted = 'sdc-magic:download-redacted';
  export const exportCleared = 'sdc-magic:export-cleared';
  export const openPanel = 'sdc-magic:open-panel';
}

const shieldSvg =
  '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
  '<path class="jp-icon3" fill="#616161" d="M12 1 3 5v6c0 5.55 3.84 10.74 9 12 5.16-1.26 9-6.45 9-12V5l-9-4zm0 ' +
  '10.99h7c-.53 4.12-3.28 7.79-7 8.94V12H5V6.3l7-3.11v8.8z"/></svg>';

export const shieldIcon = new LabIcon({ name: 'sdc-magic:shield', svgstr: shieldSvg });

interface IOptions {
  guardEnabled: boolean;
  guardLocked: boolean;
  exportDir: string;
  badges: boolean;
}

class StatusItem extends Widget {
  constructor(onClick: () => void) {
    super();
    this.addClass('sdc-StatusItem');
    this.node.setAttribute('role', 'button');
    this.node.tabIndex = 0; // reachable with the keyboard; Enter or Space opens the panel
    this.node.title = 'Outputs cleared for release in this notebook (sdc_magic). Click for details.';
    this.node.addEventListener('click', onClick);
    this.node.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        onClick();
      }
    });
  }

  show_(summary: ISummary, active: boolean, guard: 'on' | 'off' | 'locked'): void {
    this.node.textContent = active ? statusBarText(summary.totals) : 'sdc: no notebook';
    this.node.dataset.guard = guard;
    this.node.title =
      'Outputs cleared for release in this notebook (sdc_magic). Click for details.\n' +
      (guard === 'off' ? 'Export guard: off' : guard === 'locked' ? 'Export guard: on (locked by the administrator)' : 'Export guard: on');
    this.node.dataset.uncleared = String(needsAttention(summary.totals));
    this.node.classList.toggle('sdc-mod-uncleared', active && needsAttention(summary.totals) > 0);
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Disclosure panel, output badges and export guard for sdc_magic.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ISettingRegistry, IStatusBar, IDefaultFileBrowser, ICommandPalette, IRenderMimeRegistry],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    settingRegistry: ISettingRegistry | null,
    statusBar: IStatusBar | null,
    browser: IDefaultFileBrowser | null,
    palette: ICommandPalette | null,
    rendermime: IRenderMimeRegistry | null
  ) => {
    // Our own renderer for checked outputs: drawn from saved data, no kernel or widget model needed.
    const factory = rendererFactory(tracker);
    if (rendermime) {
      rendermime.addFactory(factory, factory.defaultRank);
    }
    tracker.widgetAdded.connect((_, panel) => {
      // Notebooks keep a clone of the registry made when they open: make sure ours is in it.
      if (!panel.content.rendermime.getFactory(factory.mimeTypes[0])) {
        panel.content.rendermime.addFactory(factory, factory.defaultRank);
      }
      listenForUpdates(panel);
    });
    const options: IOptions = { guardEnabled: true, guardLocked: false, exportDir: '', badges: true };
    const watcher = new NotebookWatcher(tracker);

    const select = async (info: IOutputInfo) => {
      const panel = watcher.panel;
      if (!panel) {
        return;
      }
      app.shell.activateById(panel.id);
      panel.content.activeCellIndex = info.cellIndex;
      try {
        await panel.content.scrollToItem(info.cellIndex, 'start');
      } catch {
        // scrolling is best effort
      }
      requestAnimationFrame(() => {
        const node = outputNode(panel, info.cellIndex, info.outputIndex);
        if (node) {
          node.scrollIntoView({ block: 'center' });
          node.classList.add('sdc-mod-flash');
          setTimeout(() => node.classList.remove('sdc-mod-flash'), 1600);
        }
      });
    };

    app.commands.addCommand(CommandIDs.downloadRedacted, {
      label: 'Download Redacted Copy (sdc_magic)',
      caption: 'A copy of the notebook keeping only cleared outputs, made by the sdc_magic server extension',
      isEnabled: () => watcher.panel !== null,
      execute: async () => {
        if (watcher.panel) {
          await downloadRedactedCopy(watcher.panel);
        }
      }
    });
    app.commands.addCommand(CommandIDs.exportCleared, {
      label: 'Export Cleared Outputs (sdc_magic)',
      caption: 'Runs %sdc export in the kernel',
      isEnabled: () => watcher.panel !== null,
      execute: async () => {
        if (watcher.panel) {
          const shown = watcher.summary.outputs.map(o => o.id);
          await runExport(watcher.panel, options.exportDir, shown);
        } else {
          await showText('Export cleared outputs', 'No notebook is active.');
        }
      }
    });
    app.commands.addCommand(CommandIDs.openPanel, {
      label: 'Show Disclosure Panel (sdc_magic)',
      execute: () => app.shell.activateById(PANEL_ID)
    });
    if (palette) {
      for (const command of [CommandIDs.openPanel, CommandIDs.downloadRedacted, CommandIDs.exportCleared]) {
        palette.addItem({ command, category: 'sdc_magic' });
      }
    }

    const panel = new DisclosurePanel({
      select: info => void select(info),
      exportCleared: () => void app.commands.execute(CommandIDs.exportCleared),
      downloadRedacted: () => void app.commands.execute(CommandIDs.downloadRedacted)
    });
    panel.title.icon = shieldIcon;
    app.shell.add(panel, 'right', { rank: 250 });

    // opened from the keyboard, the focus goes into the panel (not left 45 Tab presses away)
    const openPanelWithFocus = () => {
      app.shell.activateById(PANEL_ID);
      requestAnimationFrame(() => panel.focusTitle());
    };
    const status = new StatusItem(openPanelWithFocus);
    // Notebook 7 has no status bar: the same item goes in each notebook's toolbar, and a click
    // opens the panel (issue 24.4)
    const toolbarItems = new Map<NotebookPanel, StatusItem>();
    if (statusBar) {
      statusBar.registerStatusItem('sdc-magic:status', { item: status, align: 'left', rank: 5 });
    } else {
      const addToToolbar = (nb: NotebookPanel) => {
        if (toolbarItems.has(nb)) {
          return;
        }
        const item = new StatusItem(openPanelWithFocus);
        item.addClass('sdc-ToolbarItem');
        nb.toolbar.insertItem(10, 'sdc-magic-status', item);
        toolbarItems.set(nb, item);
        nb.disposed.connect(() => toolbarItems.delete(nb));
      };
      tracker.forEach(addToToolbar);
      tracker.widgetAdded.connect((_, nb) => {
        addToToolbar(nb);
        render();
      });
    }

    const render = () => {
      const nb = watcher.panel;
      panel.render(watcher.summary, nb ? nb.context.path : null, watcher.kernelState, watcher.serverChecked);
      const guard = !options.guardEnabled ? 'off' : options.guardLocked ? 'locked' : 'on';
      status.show_(watcher.summary, nb !== null, guard);
      if (nb && toolbarItems.has(nb)) {
        toolbarItems.get(nb)!.show_(watcher.summary, true, guard);
      }
      if (nb) {
        decorate(nb, watcher.summary, options.badges);
        // Output widgets may be created just after the model changes.
        requestAnimationFrame(() => decorate(nb, watcher.summary, options.badges));
      }
    };
    watcher.changed.connect(render);
    render();
    // Cells rendered later (windowed notebooks) and re-rendered outputs get their badges too.
    setInterval(() => {
      if (watcher.panel && options.badges) {
        decorate(watcher.panel, watcher.summary, true);
      }
    }, 1500);

    const guard = new ExportGuard(app, tracker, browser, () => options.guardEnabled);
    guard.install();

    if (settingRegistry) {
      settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          const apply = () => {
            const composite = settings.composite as any;
            const guardState = effectiveGuard(composite, {
              guardEnabled: settings.default('guardEnabled'),
              guardLocked: settings.default('guardLocked')
            });
            options.guardEnabled = guardState.enabled;
            options.guardLocked = guardState.locked;
            options.exportDir = typeof composite.exportDir === 'string' ? composite.exportDir : '';
            options.badges = composite.badges !== false;
            render();
          };
          settings.changed.connect(apply);
          apply();
        })
        .catch(reason => console.error('sdc-magic: could not load settings', reason));
    }

    void serverVersion().then(reply => {
      const warning = versionWarning(VERSION, reply.status === 0 ? null : reply);
      panel.setWarning(warning);
      if (warning) {
        console.warn('sdc-magic:', warning);
      }
    });

    console.log(`sdc-magic ${VERSION} activated`);
  }
};

export default plugin;
