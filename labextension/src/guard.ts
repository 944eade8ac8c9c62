/**
 * The export guard: the commands that let a notebook leave JupyterLab (File → Download,
 * Save and Export Notebook As…, the file browser's Download and Copy Download Link) are
 * intercepted. When the notebook holds outputs that `clearance()` would remove, a dialog
 * says how many and offers a redacted copy (made by the server) or Cancel.
 *
 * Lumino's CommandRegistry has no public way to wrap a command, so `execute` is wrapped
 * on the registry instance; menus, the palette and key bindings all go through it.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { FileBrowser } from '@jupyterlab/filebrowser';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';
import { Widget } from '@lumino/widgets';

import { downloadBlob, downloadRedaction, exportRedacted } from './actions';
import { formatCarriesOutputs, guardMessage, guardTitle, isGuarded, summarise, ICellLike } from './model';
import { IRedaction, redactNotebook, redactSaved } from './request';

export const GUARD_DIALOG_CLASS = 'sdc-GuardDialog';

interface IAssessment {
  notCleared: number;
  reasons: { [why: string]: number };
  /** The redacted copy, when the server made one. */
  redactions: { path: string; redaction: IRedaction }[];
  /** Why the server could not be asked, if it could not. */
  serverError: string | null;
}

type Execute = (id: string, args?: ReadonlyPartialJSONObject) => Promise<any>;

export class ExportGuard {
  constructor(
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    browser: FileBrowser | null,
    enabled: () => boolean
  ) {
    this._app = app;
    this._tracker = tracker;
    this._browser = browser;
    this._enabled = enabled;
  }

  /** Wrap `app.commands.execute`. */
  install(): void {
    const commands = this._app.commands;
    const original: Execute = commands.execute.bind(commands);
    this._original = original;
    commands.execute = ((id: string, args?: ReadonlyPartialJSONObject) => {
      if (!isGuarded(id) || !this._enabled()) {
        return original(id, args);
      }
      return this._guard(id, args || {});
    }) as typeof commands.execute;
  }

  private async _guard(id: string, args: ReadonlyPartialJSONObject): Promise<any> {
    const original = this._original!;
    if (id === 'notebook:export-to-format' && !formatCarriesOutputs(String(args['format'] || 'notebook'))) {
      return original(id, args); // an executable script holds code only: nothing to check
    }
    if (id === 'docmanager:download' || id === 'notebook:export-to-format') {
      const panel = this._notebookFor(id);
      if (!panel) {
        return original(id, args); // not a notebook: nothing of ours to check
      }
      const assessment = await this._assessPanel(panel);
      if (assessment.notCleared === 0 && !assessment.serverError) {
        return original(id, args);
      }
      const format = id === 'notebook:export-to-format' ? String(args['format'] || 'notebook') : 'notebook';
      const label = id === 'notebook:export-to-format' ? String(args['label'] || format) : '';
      if (assessment.notCleared === 0) {
        // The server could not confirm, but nothing looks uncleared here: let it go, loudly.
        console.warn('sdc-magic: export guard could not ask the server:', assessment.serverError);
        return original(id, args);
      }
      const accepted = await this._dialog(assessment, format === 'notebook' ? '' : `as ${label}`);
      if (accepted && assessment.redactions.length) {
        const { path, redaction } = assessment.redactions[0];
        await exportRedacted(redaction, path, format);
      }
      return undefined;
    }
    // filebrowser:download, filebrowser:copy-download-link
    const items = this._browser ? Array.from(this._browser.selectedItems()) : [];
    const notebooks = items.filter(i => i.type === 'notebook' || /\.ipynb$/i.test(i.path));
    if (!notebooks.length) {
      return original(id, args);
    }
    const assessment = await this._assessSaved(notebooks.map(n => n.path));
    if (assessment.notCleared === 0 && !assessment.serverError) {
      return original(id, args);
    }
    const accepted = await this._dialog(assessment, '');
    if (accepted) {
      for (const { path, redaction } of assessment.redactions) {
        downloadRedaction(redaction, path);
      }
      if (id === 'filebrowser:download') {
        // The other selected files go as they are (sdc_magic only vouches for notebooks).
        for (const item of items.filter(i => notebooks.indexOf(i) < 0 && i.type !== 'directory')) {
          const url = await this._app.serviceManager.contents.getDownloadUrl(item.path);
          const response = await fetch(url, { credentials: 'same-origin' });
          downloadBlob(await response.blob(), item.name);
        }
      }
    }
    return undefined;
  }

  private _notebookFor(id: string): NotebookPanel | null {
    if (id === 'docmanager:download') {
      const widget = this._app.shell.currentWidget;
      return widget && widget instanceof NotebookPanel ? widget : null;
    }
    return this._tracker.currentWidget;
  }

  /** What leaving would take along: the notebook as the browser holds it, and the saved copy if it differs. */
  private async _assessPanel(panel: NotebookPanel): Promise<IAssessment> {
    const path = panel.context.path;
    try {
      const redaction = await redactNotebook(panel.context.model.toJSON(), path);
      let { removed: notCleared, reasons } = redaction.report;
      if (panel.context.model.dirty) {
        // Download sends the saved copy: it may hold outputs the browser no longer shows.
        try {
          const saved = await redactSaved(path);
          if (saved.report.removed > notCleared) {
            notCleared = saved.report.removed;
            reasons = saved.report.reasons;
          }
        } catch (error) {
          console.warn('sdc-magic: could not check the saved copy', error);
        }
      }
      return { notCleared, reasons, redactions: [{ path, redaction }], serverError: null };
    } catch (error) {
      const cells: ICellLike[] = [];
      for (let i = 0; i < panel.content.model!.cells.length; i++) {
        cells.push(panel.content.model!.cells.get(i).toJSON() as ICellLike);
      }
      const summary = summarise(cells);
      const reasons: { [why: string]: number } = {};
      for (const o of summary.outputs) {
        if (o.why) {
          reasons[o.why] = (reasons[o.why] || 0) + 1;
        }
      }
      return {
        notCleared: summary.totals.notCleared,
        reasons,
        redactions: [],
        serverError: error instanceof Error ? error.message : String(error)
      };
    }
  }

  private async _assessSaved(paths: string[]): Promise<IAssessment> {
    const result: IAssessment = { notCleared: 0, reasons: {}, redactions: [], serverError: null };
    for (const path of paths) {
      try {
        const redaction = await redactSaved(path);
        result.redactions.push({ path, redaction });
        result.notCleared += redaction.report.removed;
        for (const [why, n] of Object.entries(redaction.report.reasons)) {
          result.reasons[why] = (result.reasons[why] || 0) + n;
        }
      } catch (error) {
        result.serverError = error instanceof Error ? error.message : String(error);
        result.redactions = [];
        result.notCleared = Math.max(result.notCleared, 1);
      }
    }
    return result;
  }

  /** The guard's dialog; true when the user asked for the redacted copy. */
  private async _dialog(assessment: IAssessment, how: string): Promise<boolean> {
    const body = new Widget();
    body.addClass(GUARD_DIALOG_CLASS);
    const p = document.createElement('p');
    p.className = 'sdc-GuardDialog-message';
    p.textContent = assessment.serverError
      ? `The notebook could not be checked by the sdc_magic server extension, so it cannot leave: ${assessment.serverError}. ` +
        (assessment.notCleared ? guardMessage(assessment.notCleared, assessment.reasons) : '')
      : guardMessage(assessment.notCleared, assessment.reasons);
    body.node.appendChild(p);
    if (how && assessment.redactions.length) {
      const q = document.createElement('p');
      q.textContent = `The redacted copy will be exported ${how}.`;
      body.node.appendChild(q);
    }
    const buttons = [Dialog.cancelButton({ label: 'Cancel' })];
    if (assessment.redactions.length) {
      buttons.push(Dialog.okButton({ label: 'Download redacted copy' }));
    }
    const title = guardTitle(assessment.notCleared);
    const result = await showDialog({ title: assessment.serverError ? 'Export blocked' : title, body, buttons });
    return result.button.accept && assessment.redactions.length > 0;
  }

  private _app: JupyterFrontEnd;
  private _tracker: INotebookTracker;
  private _browser: FileBrowser | null;
  private _enabled: () => boolean;
  private _original: Execute | null = null;
}
