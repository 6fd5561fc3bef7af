// In-session files: an Upload button and drag and drop (into ~/Uploads, with progress) and the ~/Downloads list,
// mounted into the control panel. Shown only to the owner and only for what client_settings allow; the server
// refuses the rest anyway.
import { errorMessage, getJson } from './api.js';
import { h } from './ui.js';

const UPLOAD_CONTENT_TYPE = 'application/x-workspace-file';

/**
 * Adds the files drawer to the session's control panel (once the panel is on the page). Answers `dispose()`.
 * `info` is the connect answer (stream_path, client_settings, view_only); `flags` the link's flags.
 */
export function mountFiles(info, flags) {
  const settings = info.client_settings ?? {};
  const uploads = settings.allow_workspace_uploads === true;
  const downloads = settings.allow_workspace_downloads === true;
  if (flags.disable_control_panel || info.view_only === true || (!uploads && !downloads)) return { dispose() {} };
  // The file routes live beside the stream: /api/stream/<id>/{uploads,downloads}.
  const base = String(info.stream_path).replace(/\/vnc$/, '');
  const cleanups = [];
  let uploadMaxBytes = null;

  const input = h('input', { type: 'file', id: 'upload-input', multiple: true, hidden: true });
  input.addEventListener('change', () => {
    for (const file of input.files ?? []) upload(file);
    input.value = '';
  });
  const transfers = h('ul', { class: 'transfers', id: 'upload-transfers', 'aria-live': 'polite' });
  const list = h('ul', { class: 'downloads', id: 'downloads-list' });
  const listStatus = h('p', { class: 'help', id: 'downloads-status' });
  const drawer = h('div', { class: 'drawer', id: 'files-drawer', hidden: true },
    uploads ? h('label', { for: 'upload-input' }, 'Upload to ~/Uploads') : null,
    uploads ? h('p', { class: 'help' }, 'Choose files, or drop them anywhere on the desktop.') : null,
    uploads ? input : null,
    uploads ? h('button', { type: 'button', id: 'upload-button', class: 'primary', onclick: () => input.click() }, 'Upload…') : null,
    uploads ? transfers : null,
    downloads ? h('label', { for: 'downloads-list' }, 'Downloads (~/Downloads)') : null,
    downloads ? list : null,
    downloads ? listStatus : null,
    downloads ? h('button', { type: 'button', id: 'downloads-refresh', onclick: () => refresh() }, 'Refresh') : null,
  );
  const toggle = h('button', { type: 'button', id: 'files-button', 'aria-expanded': 'false', 'aria-controls': 'files-drawer' }, 'Files');
  toggle.addEventListener('click', () => {
    const open = drawer.hidden;
    drawer.hidden = !open;
    toggle.setAttribute('aria-expanded', String(open));
    document.getElementById('control-panel')?.classList.toggle('pinned', open);
    if (open && downloads) refresh();
  });

  // The panel is appended right after the connect callback that calls this.
  queueMicrotask(() => {
    const bar = document.getElementById('control-panel-items');
    if (!bar) return;
    bar.insertBefore(toggle, document.getElementById('disconnect-button'));
    bar.after(drawer);
  });
  cleanups.push(() => {
    toggle.remove();
    drawer.remove();
  });

  if (uploads) {
    getJson(`${base}/uploads`, { retries: 1 }).then(({ status, data }) => {
      if (status === 200 && Number.isSafeInteger(data?.max_bytes)) uploadMaxBytes = data.max_bytes;
    }).catch(() => undefined);
    // Files dropped anywhere on the page go to ~/Uploads (the desktop itself cannot take them).
    const hasFiles = (event) => [...(event.dataTransfer?.types ?? [])].includes('Files');
    const over = (event) => {
      if (!hasFiles(event)) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = 'copy';
      document.body.classList.add('drop-target');
    };
    const leave = (event) => {
      if (event.relatedTarget === null) document.body.classList.remove('drop-target');
    };
    const drop = (event) => {
      if (!hasFiles(event)) return;
      event.preventDefault();
      document.body.classList.remove('drop-target');
      openDrawer();
      for (const file of event.dataTransfer.files) upload(file);
    };
    for (const [type, handler] of [['dragover', over], ['dragenter', over], ['dragleave', leave], ['drop', drop]]) {
      window.addEventListener(type, handler, true);
      cleanups.push(() => window.removeEventListener(type, handler, true));
    }
  }

  function openDrawer() {
    if (drawer.hidden) toggle.click();
  }

  /** Streams one file to ~/Uploads with XHR (its upload progress events drive the bar). */
  function upload(file) {
    const bar = h('progress', { max: '100', value: '0' });
    const status = h('span', { class: 'transfer-status' }, 'Uploading…');
    const item = h('li', { class: 'transfer', 'data-name': file.name }, h('span', { class: 'transfer-name' }, file.name), bar, status);
    transfers.append(item);
    const done = (text, state) => {
      status.textContent = text;
      item.dataset.state = state;
    };
    if (uploadMaxBytes !== null && file.size > uploadMaxBytes) {
      bar.remove();
      return done(`Too large (the limit is ${formatSize(uploadMaxBytes)})`, 'failed');
    }
    const xhr = new XMLHttpRequest();
    xhr.open('POST', `${base}/uploads?name=${encodeURIComponent(file.name)}`);
    xhr.setRequestHeader('content-type', UPLOAD_CONTENT_TYPE);
    xhr.responseType = 'json';
    xhr.upload.addEventListener('progress', (event) => {
      if (event.lengthComputable && event.total > 0) bar.value = Math.floor((event.loaded / event.total) * 100);
    });
    xhr.addEventListener('load', () => {
      if (xhr.status === 201) {
        bar.value = 100;
        done(`Saved as ~/Uploads/${xhr.response?.name ?? file.name}`, 'done');
      } else {
        done(errorMessage(xhr.response) || `Upload failed (${xhr.status})`, 'failed');
      }
    });
    xhr.addEventListener('error', () => done('Upload failed: the connection was lost', 'failed'));
    xhr.send(file);
    cleanups.push(() => xhr.readyState !== XMLHttpRequest.DONE && xhr.abort());
  }

  /** Reloads the ~/Downloads list: a download link per file. */
  async function refresh() {
    listStatus.textContent = 'Loading…';
    const { status, data } = await getJson(`${base}/downloads`, { retries: 1 }).catch(() => ({ status: 0, data: null }));
    if (status !== 200 || !Array.isArray(data?.files)) {
      listStatus.textContent = errorMessage(data) || 'The list could not be loaded.';
      return;
    }
    list.replaceChildren(...data.files.map((file) => h('li', {},
      h('a', { href: `${base}/downloads/${encodeURIComponent(file.name)}`, download: file.name, class: 'download-link' }, file.name),
      h('span', { class: 'size' }, formatSize(file.size)),
    )));
    listStatus.textContent = data.files.length === 0 ? 'No files in ~/Downloads yet.' : data.truncated ? 'Only the first files are listed.' : '';
  }

  return {
    dispose() {
      for (const cleanup of cleanups.splice(0)) cleanup();
      document.body.classList.remove('drop-target');
    },
  };
}

function formatSize(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}
