/**
 * The disclosure panel (right sidebar): every output of the active notebook with its
 * status, hidden-cell count and reasons; totals by status; Export and Download buttons.
 */
import { Widget } from '@lumino/widgets';

import { visibleBidiControls } from './bidi';
import { badgeText, IOutputInfo, isMessage, ISummary, STATUSES, statusBarText } from './model';
import { statusLabel } from './payload';

export const PANEL_ID = 'sdc-panel';

export interface IPanelCallbacks {
  select(info: IOutputInfo): void;
  exportCleared(): void;
  downloadRedacted(): void;
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = visibleBidiControls(text);
  }
  return node;
}

/** A status badge element (colour plus text). Shared with the output badges. */
export function badgeNode(info: IOutputInfo, text = badgeText(info)): HTMLSpanElement {
  const badge = el('span', `sdc-Badge sdc-Badge--${info.status}`, text);
  badge.dataset.status = info.status;
  return badge;
}

export class DisclosurePanel extends Widget {
  constructor(callbacks: IPanelCallbacks) {
    super();
    this.id = PANEL_ID;
    this.addClass('sdc-Panel');
    this.title.caption = 'Disclosure control (sdc_magic)';
    this._callbacks = callbacks;

    const header = el('div', 'sdc-Panel-header');
    const title = el('h2', 'sdc-Panel-title', 'Disclosure');
    title.tabIndex = -1; // focused when the panel is opened from the keyboard (see focusTitle)
    this._title = title;
    header.appendChild(title);
    this._notebook = el('div', 'sdc-Panel-notebook');
    header.appendChild(this._notebook);
    this.node.appendChild(header);

    this._warning = el('div', 'sdc-Panel-warning');
    this._warning.setAttribute('role', 'alert');
    this._warning.hidden = true;
    this.node.appendChild(this._warning);

    this._totals = el('div', 'sdc-Panel-totals');
    this._totals.setAttribute('aria-live', 'polite');
    this.node.appendChild(this._totals);

    const actions = el('div', 'sdc-Panel-actions');
    this._exportButton = el('button', 'jp-mod-styled jp-mod-accept sdc-Panel-export', 'Export cleared outputs');
    this._exportButton.type = 'button';
    this._exportButton.title = 'Runs %sdc export in the kernel and shows its reply';
    this._exportButton.addEventListener('click', () => this._callbacks.exportCleared());
    this._downloadButton = el('button', 'jp-mod-styled sdc-Panel-download', 'Download redacted copy');
    this._downloadButton.type = 'button';
    this._downloadButton.title = 'A copy of this notebook keeping only the cleared outputs (made by the server)';
    this._downloadButton.addEventListener('click', () => this._callbacks.downloadRedacted());
    actions.appendChild(this._exportButton);
    actions.appendChild(this._downloadButton);
    this.node.appendChild(actions);

    this._list = el('ul', 'sdc-Panel-list');
    this._list.setAttribute('aria-label', 'Outputs of the notebook');
    this.node.appendChild(this._list);

    this._footer = el('div', 'sdc-Panel-footer');
    this.node.appendChild(this._footer);
  }

  /** Show a warning about the server side (version mismatch, route missing), or clear it. */
  setWarning(text: string | null): void {
    this._warning.hidden = !text;
    this._warning.textContent = text || '';
  }

  render(summary: ISummary, notebook: string | null, kernel: string, serverChecked: boolean): void {
    this._notebook.textContent = notebook ? visibleBidiControls(notebook) : 'No notebook is active.';
    const enabled = notebook !== null;
    this._exportButton.disabled = !enabled;
    this._downloadButton.disabled = !enabled;

    const totals = summary.totals;
    this._totals.textContent = '';
    const chips = el('div', 'sdc-Panel-chips');
    for (const status of STATUSES) {
      const chip = el('span', `sdc-Badge sdc-Badge--${status} sdc-Panel-chip`, `${statusLabel(status)} ${totals[status]}`);
      chip.dataset.status = status;
      chip.dataset.count = String(totals[status]);
      if (!totals[status]) {
        chip.classList.add('sdc-mod-zero');
      }
      chips.appendChild(chip);
    }
    this._totals.appendChild(chips);
    this._totals.appendChild(
      el('div', 'sdc-Panel-summary', `${statusBarText(totals).replace(/^sdc: /, '')} (of ${totals.total} outputs)`)
    );

    this._list.textContent = '';
    if (enabled && !summary.outputs.length) {
      this._list.appendChild(el('li', 'sdc-Panel-empty', 'No outputs yet. Run the notebook to see what it would publish.'));
    }
    for (const info of summary.outputs) {
      this._list.appendChild(this._item(info));
    }
    this._footer.textContent =
      `kernel: ${kernel}` + (serverChecked ? ' · digests checked by the server' : '');
  }

  /** Move the keyboard focus into the panel (opened from the status bar or toolbar with Enter). */
  focusTitle(): void {
    this._title.focus();
  }

  private _title: HTMLElement;
  private _item(info: IOutputInfo): HTMLLIElement {
    const li = el('li', `sdc-Panel-item sdc-Panel-item--${info.status}`);
    li.dataset.status = info.status;
    li.dataset.cell = String(info.cellIndex);
    li.dataset.output = String(info.outputIndex);
    li.tabIndex = 0;
    li.setAttribute('role', 'button');
    const where =
      (info.executionCount !== null ? `[${info.executionCount}]` : `cell ${info.cellIndex + 1}`) +
      (info.outputIndex ? ` · output ${info.outputIndex + 1}` : '');
    li.setAttribute('aria-label', `${where}: ${statusLabel(info.status)}${info.hidden ? `, ${info.hidden} cells hidden` : ''}. Go to output.`);

    const head = el('div', 'sdc-Panel-itemHead');
    head.appendChild(badgeNode(info, statusLabel(info.status)));
    head.appendChild(el('span', 'sdc-Panel-where', where));
    const meta: string[] = [];
    const kinds: { [kind: string]: string } = {
      table: 'table',
      'row-level': 'row-level data',
      message: 'message from sdc_magic',
      progress: 'progress',
      removed: 'removed by redaction',
      microdata: 'released microdata',
      error: 'not shown'
    };
    const types: { [type: string]: string } = { stream: 'printed text', error: 'error message' };
    meta.push(info.kind ? kinds[info.kind] || info.kind : types[info.outputType] || 'other output');
    if (info.hidden) {
      meta.push(`${info.hidden} hidden`);
    }
    if (info.cells !== null && !isMessage(info)) {
      meta.push(`${info.cells} cells`);
    }
    head.appendChild(el('span', 'sdc-Panel-meta', meta.join(' · ')));
    li.appendChild(head);
    if (info.source) {
      li.appendChild(el('code', 'sdc-Panel-source', info.source));
    }
    if (info.reasons.length) {
      const reasons = el('ul', 'sdc-Panel-reasons');
      for (const r of info.reasons.slice(0, 5)) {
        reasons.appendChild(el('li', '', r));
      }
      if (info.reasons.length > 5) {
        reasons.appendChild(el('li', '', `… ${info.reasons.length - 5} more`));
      }
      li.appendChild(reasons);
    }
    const go = () => this._callbacks.select(info);
    li.addEventListener('click', go);
    li.addEventListener('keydown', (event: KeyboardEvent) => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        go();
      }
    });
    return li;
  }

  private _callbacks: IPanelCallbacks;
  private _notebook: HTMLDivElement;
  private _warning: HTMLDivElement;
  private _totals: HTMLDivElement;
  private _list: HTMLUListElement;
  private _footer: HTMLDivElement;
  private _exportButton: HTMLButtonElement;
  private _downloadButton: HTMLButtonElement;
}
