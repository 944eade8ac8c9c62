/**
 * The inline output of a checked table, drawn from the kernel's payload
 * (`application/vnd.sdc-magic.v1+json`): one compact header, the protected table in
 * JupyterLab's own table style, why cells are hidden, better answers with "Use this",
 * and an exception request. It needs no kernel to draw (a reopened notebook shows
 * everything); the actions that need the kernel go through the `sdc_magic` comm and are
 * disabled, with a note, when there is none. Text only (`textContent`): the renderer is
 * safe for untrusted notebooks.
 */
import { ICodeCellModel } from '@jupyterlab/cells';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Kernel } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { visibleBidiControls } from './bidi';
import {
  asPayload,
  codeRows,
  headerText,
  IPayload,
  ISuggestionPayload,
  ITablePayload,
  kernelNote,
  REASONS_SHOWN,
  reasonsToShow,
  SDC_MIME,
  statusLabel
} from './payload';

export const COMM_TARGET = 'sdc_magic';
export const UPDATE_TARGET = 'sdc_magic.update';
const REQUEST_TIMEOUT_MS = 120_000;

function el<K extends keyof HTMLElementTagNameMap>(tag: K, className = '', text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = visibleBidiControls(text);
  }
  return node;
}

function button(className: string, label: string, title: string): HTMLButtonElement {
  const b = el('button', `jp-mod-styled ${className}`, label);
  b.type = 'button';
  b.title = title;
  return b;
}

/** A protected table in JupyterLab's dataframe style (labels sparsified as pandas does). */
export function tableNode(t: ITablePayload): HTMLElement {
  const wrap = el('div', 'sdc-Output-table jp-RenderedHTMLCommon');
  const table = el('table', 'dataframe');
  const nIndex = Math.max(1, t.index_names.length);
  const thead = el('thead');
  t.columns.forEach((labels, level) => {
    const tr = el('tr');
    for (let k = 0; k < nIndex; k++) {
      tr.appendChild(el('th', '', k === nIndex - 1 ? t.column_names[level] || '' : ''));
    }
    labels.forEach((label, j) => {
      if (t.col_gap !== null && j === t.col_gap) {
        tr.appendChild(el('th', '', '…'));
      }
      const sameAsLeft = j > 0 && j !== t.col_gap && level < t.columns.length - 1 && labels[j - 1] === label;
      tr.appendChild(el('th', '', sameAsLeft ? '' : label));
    });
    thead.appendChild(tr);
  });
  if (t.index_names.some(n => n)) {
    const tr = el('tr');
    t.index_names.forEach(n => tr.appendChild(el('th', '', n)));
    const width = (t.columns[0] || []).length + (t.col_gap !== null ? 1 : 0);
    for (let j = 0; j < width; j++) {
      tr.appendChild(el('th'));
    }
    thead.appendChild(tr);
  }
  table.appendChild(thead);
  const tbody = el('tbody');
  let previous: string[] | null = null;
  t.rows.forEach((row, r) => {
    if (t.row_gap !== null && r === t.row_gap) {
      const gap = el('tr', 'sdc-Output-gap');
      const width = row.index.length + row.cells.length + (t.col_gap !== null ? 1 : 0);
      for (let k = 0; k < width; k++) {
        gap.appendChild(el(k < row.index.length ? 'th' : 'td', '', '…'));
      }
      tbody.appendChild(gap);
      previous = null;
    }
    const tr = el('tr');
    let same = previous !== null;
    row.index.forEach((label, k) => {
      same = same && k < row.index.length - 1 && previous![k] === label;
      tr.appendChild(el('th', '', same ? '' : label));
    });
    previous = row.index;
    const hidden = new Set(row.hidden || []);
    row.cells.forEach((cell, j) => {
      if (t.col_gap !== null && j === t.col_gap) {
        tr.appendChild(el('td', '', '…'));
      }
      const td = el('td', hidden.has(j) ? 'sdc-Hidden' : '', cell);
      if (hidden.has(j)) {
        td.title = 'hidden (see why below)';
      }
      tr.appendChild(td);
    });
    tbody.appendChild(tr);
  });
  table.appendChild(tbody);
  wrap.appendChild(table);
  if (t.row_gap !== null || t.col_gap !== null) {
    wrap.appendChild(el('div', 'sdc-Output-shape', `${t.shape[0]} rows × ${t.shape[1]} columns`));
  }
  return wrap;
}

/** Open a comm to the kernel's `sdc_magic` target with one request; resolve with its one reply. */
/** Why an output's actions are off when the running kernel did not make it. */
export const EARLIER_KERNEL_NOTE = 'Made by an earlier kernel: run this cell again to use these actions.';
/** ... and when the running kernel has not loaded the extension at all. */
export const NOT_LOADED_NOTE = 'The running kernel has not loaded sdc_magic: run %load_ext sdc_magic and this cell again.';

export function kernelRequest(kernel: Kernel.IKernelConnection, data: any): Promise<any> {
  return new Promise((resolve, reject) => {
    let done = false;
    const comm = kernel.createComm(COMM_TARGET);
    const timer = setTimeout(() => {
      if (!done) {
        done = true;
        reject(new Error('no reply from the kernel (is it busy running a cell?)'));
      }
    }, REQUEST_TIMEOUT_MS);
    comm.onMsg = msg => {
      if (!done) {
        done = true;
        clearTimeout(timer);
        resolve(msg.content.data);
      }
    };
    comm.onClose = () => {
      if (!done) {
        done = true;
        clearTimeout(timer);
        reject(new Error('the kernel does not know sdc_magic: run %load_ext sdc_magic and this cell again'));
      }
    };
    try {
      comm.open(data);
    } catch (error) {
      done = true;
      clearTimeout(timer);
      reject(error);
    }
  });
}

/** Replace every output of `panel` whose record has this id (an update from the kernel). */
export function applyOutput(panel: NotebookPanel, id: string, output: any): number {
  const model = panel.content.model;
  if (!model || !output || typeof id !== 'string') {
    return 0;
  }
  let replaced = 0;
  for (let c = 0; c < model.cells.length; c++) {
    const cell = model.cells.get(c);
    if (cell.type !== 'code') {
      continue;
    }
    const outputs = (cell as ICodeCellModel).outputs;
    for (let j = 0; j < outputs.length; j++) {
      const record = (outputs.get(j).metadata || {})['sdc_magic'] as any;
      if (record && record.id === id) {
        outputs.set(j, output);
        replaced += 1;
      }
    }
  }
  return replaced;
}

export class SdcOutput extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions, tracker: INotebookTracker) {
    super();
    this._tracker = tracker;
    this._mimeType = options.mimeType;
    this.addClass('sdc-Output');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const payload = asPayload(model.data[this._mimeType]);
    this.node.textContent = '';
    if (!payload) {
      this.node.dataset.status = 'blocked';
      this.node.appendChild(el('div', 'sdc-Output-header', 'sdc_magic: output withheld (unreadable record).'));
      return;
    }
    try {
      this._draw(payload);
    } catch (error) {
      // fail closed: nothing half-drawn stays on screen
      console.error('sdc-magic: could not draw an output', error);
      this.node.textContent = '';
      this.node.dataset.status = 'blocked';
      this.node.appendChild(el('div', 'sdc-Output-header', 'sdc_magic: output withheld (it could not be drawn).'));
    }
  }

  protected onAfterAttach(): void {
    this._refreshKernel();
    const panel = this._locate()?.panel;
    if (panel && panel !== this._watched) {
      this._watched = panel;
      panel.sessionContext.statusChanged.connect(this._refreshKernel, this);
      panel.sessionContext.kernelChanged.connect(this._refreshKernel, this);
      panel.sessionContext.connectionStatusChanged.connect(this._refreshKernel, this);
    }
  }

  dispose(): void {
    if (this._watched && !this._watched.isDisposed) {
      this._watched.sessionContext.statusChanged.disconnect(this._refreshKernel, this);
      this._watched.sessionContext.kernelChanged.disconnect(this._refreshKernel, this);
      this._watched.sessionContext.connectionStatusChanged.disconnect(this._refreshKernel, this);
    }
    this._watched = null;
    super.dispose();
  }

  private _draw(p: IPayload): void {
    const node = this.node;
    node.dataset.status = p.status;
    node.dataset.id = p.id;

    const header = el('div', 'sdc-Output-header');
    const badge = el('span', `sdc-Badge sdc-Badge--${p.status}`, statusLabel(p.status));
    badge.dataset.status = p.status;
    badge.setAttribute('role', 'status');
    header.appendChild(badge);
    header.appendChild(el('span', 'sdc-Output-summary', headerText(p)));
    if (p.rules) {
      header.title = `Rules: ${p.rules}`;
    }
    node.appendChild(header);

    node.appendChild(tableNode(p.table));

    const notes = (p.notes || []).filter(n => n && n.trim());
    if (p.exception) {
      notes.unshift(`Exception requested: ${p.exception}`);
    }
    if (notes.length) {
      const ul = el('ul', 'sdc-Output-notes');
      notes.forEach(n => ul.appendChild(el('li', '', n)));
      node.appendChild(ul);
    }

    const suggestions = p.suggestions || [];
    if (p.reasons_total > 0) {
      const details = el('details', 'sdc-Output-reasons');
      details.appendChild(el('summary', '', `Why cells are hidden (${p.reasons_total})`));
      const list = el('ul', 'sdc-Output-reasonList');
      const fill = (all: boolean) => {
        list.textContent = '';
        for (const r of reasonsToShow(p, all)) {
          const li = el('li');
          // the label isolated: a right-to-left override in it cannot reverse the sentence after it
          const label = el('b');
          label.appendChild(el('bdi', '', r.cell));
          li.appendChild(label);
          li.appendChild(document.createTextNode(visibleBidiControls(`: ${r.why}` + (r.interval ? ` — ${r.interval}` : ''))));
          list.appendChild(li);
        }
      };
      fill(false);
      details.appendChild(list);
      if (p.reasons.length > REASONS_SHOWN) {
        const all = button('sdc-Output-allReasons', `Show all ${p.reasons.length}`, 'List every hidden cell');
        all.addEventListener('click', () => {
          fill(true);
          all.remove();
        });
        details.appendChild(all);
      }
      if (p.reasons_total > p.reasons.length) {
        details.appendChild(el('div', 'sdc-Output-more-note', `${p.reasons_total - p.reasons.length} more hidden cells are listed in %sdc status and the export.`));
      }
      details.open = !suggestions.length;
      node.appendChild(details);
    }

    if (p.suggestions !== null) {
      const details = el('details', 'sdc-Output-better');
      const summary = el('summary', '', `Better answers (${suggestions.length})`);
      details.appendChild(summary);
      const list = el('div', 'sdc-Output-suggestions');
      const fill = (items: ISuggestionPayload[]) => {
        list.textContent = '';
        if (!items.length) {
          list.appendChild(el('div', 'sdc-Output-empty', 'No better answer found among the options tried.'));
        }
        items.forEach(s => list.appendChild(this._suggestion(s)));
        summary.textContent = `Better answers (${items.length})`;
      };
      fill(suggestions);
      details.appendChild(list);
      if (p.more) {
        const more = button('sdc-Output-more sdc-NeedsKernel', 'More options', 'Search further (takes a few seconds)');
        const note = el('span', 'sdc-Output-note');
        note.setAttribute('aria-live', 'polite');
        more.addEventListener('click', () => {
          void this._act(more, note, { action: 'more', id: p.id }, reply => {
            const before = list.querySelectorAll('.sdc-Suggestion').length;
            fill(reply.suggestions || []);
            const found = (reply.suggestions || []).length - before;
            note.textContent = found > 0 ? `${found} more found.` : 'No further options found.';
            if (!reply.more) {
              more.remove();
            }
          });
        });
        const row = el('div', 'sdc-Output-actions');
        row.appendChild(more);
        row.appendChild(note);
        details.appendChild(row);
      }
      details.open = suggestions.length > 0;
      node.appendChild(details);
    }

    if (p.answer) {
      const details = el('details', 'sdc-Output-answer');
      details.appendChild(el('summary', '', 'Answer the question (editable, ready to paste)'));
      const area = el('textarea', 'sdc-Output-answerText');
      area.value = p.answer;
      area.rows = 10;
      details.appendChild(area);
      node.appendChild(details);
    }

    if (p.status === 'suppressed' || p.status === 'review') {
      const details = el('details', 'sdc-Output-exception');
      details.appendChild(el('summary', '', p.exception ? 'Exception requested' : 'Request an exception'));
      if (p.exception) {
        details.appendChild(el('div', 'sdc-Output-note', `Recorded for ${p.id}: ${p.exception}. The output checker decides.`));
      } else {
        const reason = el('textarea', 'sdc-Output-reason');
        reason.placeholder = 'Why should this output be released as it is? (recorded for the output checker)';
        reason.rows = 2;
        const send = button('sdc-Output-request sdc-NeedsKernel', 'Request exception', 'Ask the output checker to release this output as it is');
        const note = el('span', 'sdc-Output-note');
        note.setAttribute('aria-live', 'polite');
        send.addEventListener('click', () => {
          const text = reason.value.trim();
          if (!text) {
            note.textContent = 'Give a reason first.';
            return;
          }
          void this._act(send, note, { action: 'exception', id: p.id, reason: text }, reply => {
            note.textContent = `Recorded: status is now ${statusLabel(reply.status || 'review')}.`;
            const located = this._locate();
            if (located && reply.output) {
              applyOutput(located.panel, p.id, reply.output);
            }
          });
        });
        details.appendChild(reason);
        const row = el('div', 'sdc-Output-actions');
        row.appendChild(send);
        row.appendChild(note);
        details.appendChild(row);
      }
      node.appendChild(details);
    }
    this._kernelNote = el('div', 'sdc-Output-kernelNote');
    this._kernelNote.hidden = true;
    node.appendChild(this._kernelNote);
    this._refreshKernel();
  }

  private _suggestion(s: ISuggestionPayload): HTMLElement {
    const box = el('div', 'sdc-Suggestion');
    box.dataset.kind = s.kind;
    const head = el('div', 'sdc-Suggestion-head');
    head.appendChild(el('b', 'sdc-Suggestion-title', s.title));
    head.appendChild(el('span', 'sdc-Suggestion-state', ` (${s.state})`));
    box.appendChild(head);
    if (s.detail && s.kind === 'rate') {
      box.appendChild(el('div', 'sdc-Suggestion-detail', s.detail));
    }
    if (s.preview) {
      box.appendChild(tableNode(s.preview));
    }
    const code = el('textarea', 'sdc-Suggestion-code');
    code.value = s.code;
    code.readOnly = true;
    code.rows = codeRows(s.code);
    code.setAttribute('aria-label', `Code for: ${s.title}`);
    box.appendChild(code);
    const row = el('div', 'sdc-Output-actions');
    const use = button('sdc-Suggestion-use jp-mod-accept', 'Use this', 'Insert this code in a new cell below this output');
    const copy = button('sdc-Suggestion-copy', 'Copy', 'Copy the code to the clipboard');
    const note = el('span', 'sdc-Output-note');
    note.setAttribute('aria-live', 'polite');
    use.addEventListener('click', () => {
      note.textContent = this._insertBelow(s.code) ? 'Inserted in a new cell below.' : 'No notebook here: copy the code instead.';
    });
    copy.addEventListener('click', () => {
      const select = () => {
        code.focus();
        code.select();
        note.textContent = 'Selected: press Ctrl+C to copy.';
      };
      if (!navigator.clipboard) {
        select(); // no clipboard API (e.g. a page not served over https)
        return;
      }
      navigator.clipboard.writeText(s.code).then(() => (note.textContent = 'Copied.'), select);
    });
    row.appendChild(use);
    row.appendChild(copy);
    row.appendChild(note);
    box.appendChild(row);
    return box;
  }

  /** The notebook panel and cell holding this output. */
  private _locate(): { panel: NotebookPanel; cellIndex: number } | null {
    let found: { panel: NotebookPanel; cellIndex: number } | null = null;
    this._tracker.forEach(panel => {
      if (found || !panel.node.contains(this.node)) {
        return;
      }
      const cellIndex = panel.content.widgets.findIndex(cell => cell.node.contains(this.node));
      if (cellIndex >= 0) {
        found = { panel, cellIndex };
      }
    });
    return found;
  }

  private _insertBelow(code: string): boolean {
    const located = this._locate();
    if (!located) {
      return false;
    }
    const notebook = located.panel.content;
    notebook.activeCellIndex = located.cellIndex;
    notebook.deselectAll();
    NotebookActions.insertBelow(notebook);
    const cell = notebook.activeCell;
    if (!cell) {
      return false;
    }
    cell.model.sharedModel.setSource(code);
    void notebook.scrollToItem(notebook.activeCellIndex, 'center');
    return true;
  }

  private _kernel(): Kernel.IKernelConnection | null {
    const located = this._locate();
    return located?.panel.sessionContext.session?.kernel ?? null;
  }

  private _refreshKernel(): void {
    if (!this._kernelNote || this.isDisposed) {
      return;
    }
    const kernel = this._kernel();
    let note = kernelNote(
      kernel ? { status: kernel.status, connected: kernel.connectionStatus === 'connected' } : null
    );
    if (kernel && (kernel.status === 'restarting' || kernel.status === 'autorestarting')) {
      this._asked = null; // a new kernel process: it knows none of the outputs made before
      this._known = null;
    } else if (kernel && kernel.status === 'busy' && this._known === NOT_LOADED_NOTE) {
      this._asked = null; // a cell may be loading the extension: ask again when it is idle
    }
    const buttons = Array.from(this.node.querySelectorAll('.sdc-NeedsKernel')) as HTMLButtonElement[];
    if (note === null && kernel && buttons.length) {
      // a running kernel may not be the one that made this output (after a restart): ask it once
      if (this._asked !== kernel && kernel.status === 'idle') {
        this._asked = kernel;
        this._known = null;
        void this._ping(kernel);
      } else if (this._known !== null && this._known !== true) {
        note = this._known;
      }
    }
    if (this._lastNote !== note) {
      // an earlier action's reply ("run %load_ext…") belongs to the earlier kernel
      this.node.querySelectorAll('.sdc-Output-actions .sdc-Output-note').forEach(n => (n.textContent = ''));
      this._lastNote = note;
    }
    buttons.forEach(b => (b.disabled = note !== null));
    this._kernelNote.hidden = note === null || buttons.length === 0;
    this._kernelNote.textContent = note || '';
  }

  /** Whether the running kernel made this output (its actions need the kernel's own record of it). */
  private async _ping(kernel: Kernel.IKernelConnection): Promise<void> {
    const id = this.node.dataset.id;
    if (!id) {
      return;
    }
    let known: true | string;
    try {
      const reply = await kernelRequest(kernel, { action: 'ping', id });
      known = reply && reply.known === true ? true : EARLIER_KERNEL_NOTE;
    } catch (error) {
      if (!(error instanceof Error && /does not know sdc_magic/.test(error.message))) {
        if (this._asked === kernel) {
          this._asked = null; // no answer (a busy kernel): ask again when it is idle
        }
        return;
      }
      known = NOT_LOADED_NOTE;
    }
    if (this._asked === kernel && !this.isDisposed) {
      this._known = known;
      this._refreshKernel();
    }
  }

  private async _act(
    b: HTMLButtonElement,
    note: HTMLElement,
    request: any,
    onReply: (reply: any) => void
  ): Promise<void> {
    const kernel = this._kernel();
    if (!kernel) {
      note.textContent = kernelNote(null) || '';
      return;
    }
    b.disabled = true;
    note.textContent = 'Asking the kernel…';
    try {
      const reply = await kernelRequest(kernel, request);
      if (!reply || reply.ok !== true) {
        note.textContent = (reply && reply.error) || 'The kernel could not do this.';
      } else {
        onReply(reply);
      }
    } catch (error) {
      note.textContent = error instanceof Error ? error.message : String(error);
    } finally {
      if (!b.isConnected || this.isDisposed) {
        return;
      }
      b.disabled = false;
      this._refreshKernel();
    }
  }

  private _tracker: INotebookTracker;
  private _mimeType: string;
  private _kernelNote: HTMLElement | null = null;
  private _watched: NotebookPanel | null = null;
  /** The kernel asked whether it made this output, and its answer (true, or why not). */
  private _asked: Kernel.IKernelConnection | null = null;
  private _known: true | string | null = null;
  private _lastNote: string | null | undefined = undefined;
}

/** The rendermime factory; ranked before text/html (50) and the widget view, safe for untrusted notebooks. */
export function rendererFactory(tracker: INotebookTracker): IRenderMime.IRendererFactory {
  return {
    safe: true,
    mimeTypes: [SDC_MIME],
    defaultRank: 20,
    createRenderer: options => new SdcOutput(options, tracker)
  };
}

/** Listen for the kernel's pushed updates (`%sdc exception`) on every kernel of `panel`. */
export function listenForUpdates(panel: NotebookPanel): void {
  const register = () => {
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel || (kernel as any).__sdcUpdates) {
      return;
    }
    (kernel as any).__sdcUpdates = true;
    kernel.registerCommTarget(UPDATE_TARGET, (_comm, msg) => {
      const data = msg.content.data as any;
      if (data && typeof data.id === 'string' && data.output) {
        applyOutput(panel, data.id, data.output);
      }
    });
  };
  panel.sessionContext.kernelChanged.connect(register);
  panel.sessionContext.ready.then(register).catch(() => undefined);
  register();
  reportShown(panel);
}

/** The ids of the checked outputs the notebook holds now (saved or not). */
export function shownIds(panel: NotebookPanel): string[] {
  const ids: string[] = [];
  const cells = panel.content.model?.cells;
  for (let i = 0; cells && i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type !== 'code') {
      continue;
    }
    const outputs = (cell as ICodeCellModel).outputs;
    for (let j = 0; j < outputs.length; j++) {
      const record = outputs.get(j).metadata['sdc_magic'] as any;
      if (record && typeof record === 'object' && typeof record.id === 'string') {
        ids.push(record.id);
      }
    }
  }
  return ids;
}

/**
 * Tell the kernel which of its outputs the notebook still shows, whenever that changes, so
 * that `%sdc export` typed in a cell leaves out a deleted cell or a cleared output (issue 24.2:
 * a cell cannot ask the front-end while it runs; the message goes before the next cell's).
 */
function reportShown(panel: NotebookPanel): void {
  let sent: string | null = null;
  let kernelSent: Kernel.IKernelConnection | null = null;
  // the outputs the notebook held when it first saw the current kernel: an earlier kernel's (after
  // a reload or a restart the new kernel may not have sdc_magic loaded: it is not asked until
  // it makes an output of its own)
  let baselineKernel: Kernel.IKernelConnection | null = null;
  let before = new Set<string>();
  // every output the notebook has held with this kernel: only those can be gone (an output the
  // kernel made but the notebook has not received yet is not)
  let seen = new Set<string>();
  const report = () => {
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel || kernel.isDisposed || kernel.status === 'dead' || !panel.content.model) {
      return;
    }
    const ids = shownIds(panel);
    const key = ids.join(',');
    if (kernel !== kernelSent) {
      seen = new Set<string>();
    }
    ids.forEach(id => seen.add(id));
    if (kernel === kernelSent && key === sent) {
      return;
    }
    if (kernel !== baselineKernel) {
      // the first look at this kernel: what the notebook holds now is an earlier kernel's
      baselineKernel = kernel;
      before = new Set<string>(ids);
    }
    if (kernel !== kernelSent && (!ids.length || ids.every(id => before.has(id)))) {
      // nothing of this kernel's to leave out yet: the outputs are an earlier kernel's (after a
      // reload or a restart the new kernel may not even have sdc_magic loaded; it is not asked)
      return;
    }
    kernelSent = kernel;
    sent = key;
    // a kernel without sdc_magic closes the comm: nothing to tell it
    kernelRequest(kernel, { action: 'shown', ids, seen: Array.from(seen) }).catch(() => undefined);
  };
  panel.context.ready.then(() => {
    panel.content.model?.contentChanged.connect(report);
    report();
  }).catch(() => undefined);
  panel.sessionContext.kernelChanged.connect(() => {
    kernelSent = null;
    sent = null;
  });
}
