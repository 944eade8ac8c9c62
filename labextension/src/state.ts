/**
 * Follows the active notebook and keeps its disclosure summary up to date: the local
 * classification at once, then the server's `clearance()` answers (digest check), a
 * moment after the outputs stop changing.
 */
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ISignal, Signal } from '@lumino/signaling';

import { ICellLike, ISummary, outputKey, summarise } from './model';
import { redactNotebook } from './request';

const SERVER_CHECK_DELAY = 700;

export class NotebookWatcher {
  constructor(tracker: INotebookTracker) {
    this._tracker = tracker;
    tracker.currentChanged.connect(this._onCurrentChanged, this);
    this._onCurrentChanged();
  }

  /** Emitted whenever the summary (or the kernel state) changes. */
  get changed(): ISignal<this, ISummary> {
    return this._changed;
  }

  get panel(): NotebookPanel | null {
    return this._panel;
  }

  get summary(): ISummary {
    return this._summary;
  }

  /** Whether the server's digest check has been applied to the current summary. */
  get serverChecked(): boolean {
    return this._serverWhy !== undefined;
  }

  get kernelState(): string {
    const session = this._panel?.sessionContext;
    if (!session) {
      return 'no notebook';
    }
    const kernel = session.session?.kernel;
    if (!kernel || kernel.isDisposed) {
      // after a shutdown the session is gone: not "starting"
      return session.isDisposed || session.hasNoKernel || session.isReady || !session.session ? 'no kernel' : 'starting';
    }
    if (kernel.status === 'dead') {
      return 'stopped';
    }
    return session.kernelDisplayStatus;
  }

  /** The cells of the active notebook, as nbformat JSON. */
  cells(): ICellLike[] {
    const model = this._panel?.content.model;
    if (!model) {
      return [];
    }
    const cells: ICellLike[] = [];
    for (let i = 0; i < model.cells.length; i++) {
      cells.push(model.cells.get(i).toJSON() as ICellLike);
    }
    return cells;
  }

  refresh(): void {
    this._summary = summarise(this.cells(), this._serverWhy);
    this._changed.emit(this._summary);
  }

  dispose(): void {
    this._disconnect();
    Signal.clearData(this);
  }

  private _onCurrentChanged(): void {
    this._disconnect();
    this._panel = this._tracker.currentWidget;
    const panel = this._panel;
    if (panel) {
      panel.context.ready.then(() => {
        if (panel === this._panel) {
          this._contentChanged();
        }
      });
      panel.context.model.contentChanged.connect(this._contentChanged, this);
      panel.sessionContext.statusChanged.connect(this._kernelChanged, this);
      panel.sessionContext.kernelChanged.connect(this._kernelChanged, this);
      panel.disposed.connect(this._onCurrentChanged, this);
    }
    this._contentChanged();
  }

  private _disconnect(): void {
    const panel = this._panel;
    if (panel && !panel.isDisposed) {
      panel.context.model.contentChanged.disconnect(this._contentChanged, this);
      panel.sessionContext.statusChanged.disconnect(this._kernelChanged, this);
      panel.sessionContext.kernelChanged.disconnect(this._kernelChanged, this);
      panel.disposed.disconnect(this._onCurrentChanged, this);
    }
    this._panel = null;
  }

  private _kernelChanged(): void {
    this._changed.emit(this._summary);
  }

  private _contentChanged(): void {
    this._generation += 1;
    this._serverWhy = undefined;
    this.refresh();
    if (this._timer !== null) {
      clearTimeout(this._timer);
    }
    this._timer = setTimeout(() => {
      this._timer = null;
      void this._serverCheck();
    }, SERVER_CHECK_DELAY);
  }

  /** Ask the server for `clearance()` of every output (it checks digests); its answer decides. */
  private async _serverCheck(): Promise<void> {
    const generation = this._generation;
    const cells = this.cells();
    const toCheck = cells.some(c => c.cell_type === 'code' && (c.outputs || []).length > 0);
    if (!toCheck || !this._panel) {
      return;
    }
    // Only outputs travel: sources stay in the browser.
    const skeleton = {
      cells: cells.map(c => ({ cell_type: c.cell_type, outputs: c.cell_type === 'code' ? c.outputs || [] : [] })),
      metadata: {}
    };
    try {
      const reply = await redactNotebook(skeleton, null);
      if (generation !== this._generation) {
        return; // the notebook changed meanwhile: a newer check is scheduled
      }
      const map = new Map<string, string | null>();
      for (const o of reply.outputs) {
        map.set(outputKey(o.cell, o.output), o.reason);
      }
      this._serverWhy = map;
      this.refresh();
    } catch (error) {
      console.warn('sdc-magic: server check failed', error);
    }
  }

  private _tracker: INotebookTracker;
  private _panel: NotebookPanel | null = null;
  private _summary: ISummary = summarise([]);
  private _serverWhy: Map<string, string | null> | undefined = undefined;
  private _generation = 0;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _changed = new Signal<this, ISummary>(this);
}
