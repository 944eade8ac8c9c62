/**
 * What the panel's buttons and the guard do: download a redacted copy (made by the
 * server), export redacted to another format, and run `%sdc export` in the kernel.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { KernelMessage, ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { exportCode, redactedName, stripAnsi } from './model';
import { IRedaction, redactNotebook, redactSaved } from './request';

const EXPORT_TIMEOUT_MS = 300_000;

/** Save `blob` as a file through the browser's download. */
export function downloadBlob(blob: Blob, filename: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  a.style.display = 'none';
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** Download the server's redacted notebook JSON as `<name>.redacted.ipynb`. */
export function downloadRedaction(redaction: IRedaction, path: string): void {
  const text = JSON.stringify(redaction.notebook, null, 1) + '\n';
  downloadBlob(new Blob([text], { type: 'application/x-ipynb+json' }), redactedName(path));
}

/** Redact the notebook as the browser holds it (server-side) and download it. */
export async function downloadRedactedCopy(panel: NotebookPanel): Promise<IRedaction | null> {
  const path = panel.context.path;
  try {
    const redaction = await redactNotebook(panel.context.model.toJSON(), path);
    downloadRedaction(redaction, path);
    return redaction;
  } catch (error) {
    await showError('Download redacted copy', error);
    return null;
  }
}

/** Redact a saved notebook (server-side) and download it. */
export async function downloadRedactedSaved(path: string): Promise<IRedaction | null> {
  try {
    const redaction = await redactSaved(path);
    downloadRedaction(redaction, path);
    return redaction;
  } catch (error) {
    await showError('Download redacted copy', error);
    return null;
  }
}

const EXTENSIONS: { [format: string]: string } = {
  html: '.html',
  markdown: '.md',
  python: '.py',
  script: '.py',
  latex: '.tex',
  pdf: '.pdf',
  webpdf: '.pdf',
  qtpdf: '.pdf',
  rst: '.rst',
  asciidoc: '.asciidoc',
  notebook: '.ipynb'
};

/** Convert an already-redacted notebook with the server's nbconvert and download the result. */
export async function exportRedacted(redaction: IRedaction, path: string, format: string): Promise<void> {
  if (format === 'notebook') {
    downloadRedaction(redaction, path);
    return;
  }
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'nbconvert', encodeURIComponent(format));
  const name = path.split('/').pop() || 'notebook.ipynb';
  try {
    const response = await ServerConnection.makeRequest(
      url,
      { method: 'POST', body: JSON.stringify({ name, content: redaction.notebook }) },
      settings
    );
    if (!response.ok) {
      throw new Error(`nbconvert ${format}: HTTP ${response.status} ${await response.text()}`);
    }
    const disposition = response.headers.get('Content-Disposition') || '';
    const match = /filename\*?=(?:UTF-8'')?"?([^";]+)"?/i.exec(disposition);
    const filename = match
      ? decodeURIComponent(match[1]).replace(/^(.*?)(\.[^.]+)$/, '$1.redacted$2')
      : redactedName(path, EXTENSIONS[format] || `.${format}`);
    downloadBlob(await response.blob(), filename);
  } catch (error) {
    await showError(`Export redacted copy as ${format}`, error);
  }
}

/**
 * Run `%sdc export DIR --force --only=IDS` in the notebook's kernel and show what it printed
 * (or the error, e.g. while the magic does not exist yet). ``ids``: the outputs the notebook
 * shows now, so that deleted or cleared outputs and those of earlier kernels stay out.
 */
export async function runExport(
  panel: NotebookPanel,
  dir: string,
  ids?: ReadonlyArray<string | null> | null
): Promise<string> {
  const code = exportCode(dir, ids);
  const title = 'Export cleared outputs';
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel || kernel.status === 'dead' || kernel.connectionStatus !== 'connected') {
    const text = `No running kernel for ${panel.context.path}: start or restart the kernel, run the notebook, then export.`;
    await showText(title, text);
    return text;
  }
  const lines: string[] = [];
  const future = kernel.requestExecute({
    code,
    silent: false,
    store_history: false,
    allow_stdin: false,
    stop_on_error: false
  });
  future.onIOPub = (msg: KernelMessage.IIOPubMessage) => {
    const type = msg.header.msg_type;
    const content = msg.content as any;
    if (type === 'stream') {
      lines.push(String(content.text));
    } else if (type === 'error') {
      const trace = Array.isArray(content.traceback) ? content.traceback.join('\n') : '';
      lines.push(stripAnsi(trace || `${content.ename}: ${content.evalue}`) + '\n');
    } else if ((type === 'execute_result' || type === 'display_data') && content.data) {
      const plain = content.data['text/plain'];
      if (plain) {
        lines.push(String(plain) + '\n');
      }
    }
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onStatus: (() => void) | undefined;
  try {
    const reply = await Promise.race([
      future.done,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('no reply from the kernel within 5 minutes')), EXPORT_TIMEOUT_MS);
        // A kernel that dies or disconnects never replies: stop waiting.
        onStatus = () => {
          if (kernel.isDisposed || kernel.status === 'dead' || kernel.status === 'restarting' || kernel.connectionStatus === 'disconnected') {
            reject(new Error(`the kernel stopped (${kernel.status}, ${kernel.connectionStatus}) before replying`));
          }
        };
        kernel.statusChanged.connect(onStatus);
        kernel.connectionStatusChanged.connect(onStatus);
        kernel.disposed.connect(onStatus);
      })
    ]);
    const status = (reply?.content as any)?.status;
    if (status && status !== 'ok' && !lines.length) {
      lines.push(`kernel replied: ${status}`);
    }
  } catch (error) {
    lines.push(`\n${error instanceof Error ? error.message : String(error)}`);
  } finally {
    if (timer !== undefined) {
      clearTimeout(timer);
    }
    if (onStatus && !kernel.isDisposed) {
      kernel.statusChanged.disconnect(onStatus);
      kernel.connectionStatusChanged.disconnect(onStatus);
      kernel.disposed.disconnect(onStatus);
    }
  }
  const text = `$ ${code}\n\n` + (lines.join('').trim() || '(the kernel printed nothing)');
  await showText(title, text);
  return text;
}

function textBody(text: string): Widget {
  const body = new Widget();
  body.addClass('sdc-DialogText');
  const pre = document.createElement('pre');
  pre.textContent = text;
  body.node.appendChild(pre);
  return body;
}

export async function showText(title: string, text: string): Promise<void> {
  await showDialog({ title, body: textBody(text), buttons: [Dialog.okButton({ label: 'Close' })] });
}

async function showError(title: string, error: unknown): Promise<void> {
  const message = error instanceof Error ? error.message : String(error);
  await showText(title, message);
}
