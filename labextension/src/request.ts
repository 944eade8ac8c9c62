/**
 * The only place that talks to the sdc_magic server routes (`/sdc-magic/...`).
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export const NAMESPACE = 'sdc-magic';

/** The server's answer about one output: `clearance()`'s reason, or null when it may leave. */
export interface IServerOutput {
  cell: number;
  output: number;
  reason: string | null;
}

export interface IRedaction {
  schema: number;
  path: string | null;
  notebook: { [key: string]: unknown };
  report: { kept: number; removed: number; reasons: { [why: string]: number }; widget_state_dropped: boolean };
  outputs: IServerOutput[];
}

export class RequestError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message);
  }
}

async function request<T>(endpoint: string, init: RequestInit = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, NAMESPACE, endpoint);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new RequestError(`sdc_magic server route unreachable: ${error}`, 0);
  }
  const text = await response.text();
  if (!response.ok) {
    let message = text;
    try {
      message = JSON.parse(text).message || text;
    } catch {
      // not JSON: keep the text
    }
    throw new RequestError(`${NAMESPACE}/${endpoint}: HTTP ${response.status} ${message}`.trim(), response.status);
  }
  return JSON.parse(text) as T;
}

/** `GET /sdc-magic/version`: {status, version}; status 0 when the server did not answer. */
export async function serverVersion(): Promise<{ status: number; version?: string }> {
  try {
    const reply = await request<{ version: string }>('version');
    return { status: 200, version: reply.version };
  } catch (error) {
    return { status: error instanceof RequestError ? error.status : 0 };
  }
}

/** `POST /sdc-magic/redact` with a notebook held in the browser. */
export function redactNotebook(notebook: unknown, path: string | null): Promise<IRedaction> {
  return request<IRedaction>('redact', { method: 'POST', body: JSON.stringify({ notebook, path }) });
}

/** `GET /sdc-magic/redact?path=` for a saved notebook. */
export function redactSaved(path: string): Promise<IRedaction> {
  return request<IRedaction>('redact?path=' + encodeURIComponent(path));
}
