// Files on the chat page (docs/web.md, "Files"): the composer's attachments
// (a button, drag-and-drop and paste; each file uploaded at once, with its
// progress, then a chip to remove it before sending) and the files drawn on
// a sent message and on a tool's card.
//
// A file goes to the server as soon as it is chosen, so that a document's
// text is being read while the question is typed (the run waits for it);
// the message then names the uploaded files by id. Names, types and error
// messages go into the page as text, never as HTML.

import { api, upload } from "./api.js";

const UNITS = ["bytes", "KB", "MB", "GB"];

export function formatSize(bytes) {
  let value = Number(bytes) || 0;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) { value /= 1024; unit += 1; }
  if (unit === 0) return value === 1 ? "1 byte" : `${value} bytes`;
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${UNITS[unit]}`;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
// is no help to a reader: the name's extension, else the type's last word.
function typeLabel(name, contentType) {
  const dot = (name || "").lastIndexOf(".");
  if (dot > 0 && dot < name.length - 1 && name.length - dot <= 6) return name.slice(dot + 1).toUpperCase();
  const sub = (contentType || "").split("/").pop().split(/[.+;-]/)[0];
  return sub ? sub.toUpperCase() : "FILE";
}

export function contentUrl(file) {
  return file.content_url || `/api/files/${encodeURIComponent(file.id)}/content/`;
}

// A stored file (the API's FileOut, or a tool result's {id, name,
// content_type, kind, size}): an image as a thumbnail that opens it, any
// other file as a chip that downloads it, with the reason when its text
// could not be read.
export function storedFileElement(file) {
  const url = contentUrl(file);
  const item = el("li", `file-item ${file.kind === "image" ? "image" : "document"}`);
  item.dataset.fileId = file.id;
  if (file.kind === "image") {
    const link = el("a", "file-thumb");
    link.href = url;
    link.target = "_blank";
    link.rel = "noopener";
    link.title = `${file.name} (${formatSize(file.size)}), opens in a new tab`;
    const image = el("img");
    image.src = url;
    image.alt = file.name;
    image.loading = "lazy";
    link.append(image);
    item.append(link);
    return item;
  }
  const link = el("a", "file-chip");
  link.href = url;
  link.download = file.name;
  link.title = `Download ${file.name}`;
  link.append(el("span", "file-icon", typeLabel(file.name, file.content_type)),
    el("span", "file-name", file.name), el("span", "file-meta", formatSize(file.size)));
  item.append(link);
  if (file.text_status === "failed") {
    item.classList.add("unreadable");
    item.append(el("span", "file-error", file.text_error || "Its text could not be read."));
  }
  return item;
}

// Draws ``files`` into ``container`` (a <ul>), keeping what is there when
// the same files are drawn again (a live run redraws each frame: images
// must not reload).
export function renderStoredFiles(container, files) {
  const list = files || [];
  const key = list.map((f) => `${f.id}:${f.text_status || ""}`).join(",");
  if (container.dataset.files === key) return;
  container.dataset.files = key;
  container.replaceChildren(...list.map(storedFileElement));
  container.hidden = list.length === 0;
}

export function storedFilesList(files, className = "") {
  const list = el("ul", `file-list ${className}`.trim());
  list.setAttribute("aria-label", "Attached files");
  renderStoredFiles(list, files);
  return list;
}

// ---------------------------------------------------------------- composer

// A pasted screenshot arrives as "image.png": give it a name that says what
// and when, so two of them can be told apart.
function pastedName(file) {
  if (file.name && file.name !== "image.png") return file;
  const stamp = new Date().toISOString().slice(0, 19).replace("T", " ").replaceAll(":", "-");
  const extension = (file.type.split("/")[1] || "png").split("+")[0];
  return new File([file], `Pasted image ${stamp}.${extension}`, { type: file.type, lastModified: file.lastModified });
}

function hasFiles(dataTransfer) {
  return Boolean(dataTransfer) && [...dataTransfer.types].includes("Files");
}

// The composer's files. ``conversationId()`` names the conversation to
// upload into (null before the first message: the file is then uploaded
// on its own and joins the conversation when it is attached);
// ``onChange()`` is called whenever whether an upload runs, or which files
// are ready, changes.
export class ComposerFiles {
  constructor({ list, button, fileInput, dropZones, pasteTarget, conversationId, onChange }) {
    this.list = list;
    this.button = button;
    this.entries = [];
    this.conversationId = conversationId;
    this.onChange = onChange;
    this.counter = 0;
    button.addEventListener("click", () => fileInput.click());
    fileInput.addEventListener("change", () => {
      this.add([...fileInput.files]);
      fileInput.value = "";  // choosing the same file again is a new choice
    });
    pasteTarget.addEventListener("paste", (event) => this.paste(event));
    for (const zone of dropZones) this.acceptDrops(zone);
    // A file dropped beside the zones must not replace the page with itself.
    for (const type of ["dragover", "drop"]) {
      document.addEventListener(type, (event) => { if (hasFiles(event.dataTransfer)) event.preventDefault(); });
    }
    this.list.hidden = true;
  }

  acceptDrops(zone) {
    let depth = 0;  // dragenter/leave fire for every child crossed
    const show = (on) => { zone.classList.toggle("drag-over", on); };
    zone.addEventListener("dragenter", (event) => {
      if (!hasFiles(event.dataTransfer)) return;
      depth += 1;
      show(true);
    });
    zone.addEventListener("dragleave", () => {
      depth = Math.max(0, depth - 1);
      if (depth === 0) show(false);
    });
    zone.addEventListener("dragover", (event) => {
      if (!hasFiles(event.dataTransfer)) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = "copy";
    });
    zone.addEventListener("drop", (event) => {
      depth = 0;
      show(false);
      if (!hasFiles(event.dataTransfer)) return;
      event.preventDefault();
      this.add([...event.dataTransfer.files]);
    });
  }

  // Files on the clipboard (a screenshot, an image copied from a page, files
  // copied in a file manager) are attached. When the clipboard also holds
  // plain text (a copy from a word processor carries a picture of it too),
  // the text is pasted as usual and nothing is attached.
  paste(event) {
    const data = event.clipboardData;
    if (!data || !data.files || data.files.length === 0) return;
    if (data.types.includes("text/plain") && data.getData("text/plain")) return;
    event.preventDefault();
    this.add([...data.files].map(pastedName));
  }

  add(files) {
    for (const file of files) this.start(file);
    this.render();
  }

  start(file) {
    this.counter += 1;
    const entry = {
      key: this.counter, file, state: "uploading", progress: 0, result: null, error: "", upload: null,
      preview: file.type.startsWith("image/") ? URL.createObjectURL(file) : "", node: null,
    };
    this.entries.push(entry);
    const form = new FormData();
    form.append("file", file, file.name);
    const conversation = this.conversationId();
    if (conversation) form.append("conversation_id", conversation);
    entry.upload = upload("/api/files/", form, (fraction) => {
      entry.progress = fraction;
      const bar = entry.node && entry.node.querySelector("progress");
      if (bar) bar.value = fraction;
    });
    entry.upload.promise.then((stored) => {
      entry.state = "done";
      entry.result = stored;
    }, (error) => {
      if (error.code === "aborted") return;
      entry.state = "error";
      entry.error = error.message;
    }).finally(() => {
      entry.upload = null;
      if (this.entries.includes(entry)) this.render();
    });
  }

  remove(entry) {
    const index = this.entries.indexOf(entry);
    const hadFocus = entry.node && entry.node.contains(document.activeElement);
    this.entries = this.entries.filter((e) => e !== entry);
    if (entry.upload) entry.upload.abort();
    if (entry.preview) URL.revokeObjectURL(entry.preview);
    // Uploaded but never sent: it would only take up the user's space.
    if (entry.state === "done" && entry.result) api("DELETE", `/api/files/${entry.result.id}/`).catch(() => {});
    this.render();
    // A keyboard user stays in the list: on the next chip, else the button.
    if (hadFocus) {
      const next = this.entries[Math.min(index, this.entries.length - 1)];
      (next ? next.node.querySelector(".attachment-remove") : this.button).focus();
    }
  }

  uploading() { return this.entries.some((e) => e.state === "uploading"); }

  // The uploaded files a message sends (FileOut), in the order chosen.
  ready() { return this.entries.filter((e) => e.state === "done").map((e) => e.result); }

  // After the message is accepted: its files are the message's now.
  clear() {
    for (const entry of this.entries) if (entry.preview) URL.revokeObjectURL(entry.preview);
    this.entries = [];
    this.render();
  }

  // The server refused the message because of one of its files (a document
  // whose text could not be read): that chip says why, until removed.
  refuse(fileId, message) {
    const entry = this.entries.find((e) => e.result && e.result.id === fileId);
    if (!entry) return false;
    entry.state = "error";
    entry.error = message;
    this.render();
    return true;
  }

  render() {
    const nodes = this.entries.map((entry) => this.chip(entry));
    this.list.replaceChildren(...nodes);
    this.list.hidden = nodes.length === 0;
    this.onChange();
  }

  chip(entry) {
    const { file } = entry;
    const item = el("li", "attachment");
    item.dataset.state = entry.state;
    item.dataset.name = file.name;
    if (entry.result) item.dataset.fileId = entry.result.id;
    if (entry.preview) {
      const image = el("img", "attachment-thumb");
      image.src = entry.preview;
      image.alt = "";
      item.append(image);
    } else {
      item.append(el("span", "file-icon", typeLabel(file.name, file.type)));
    }
    const info = el("span", "attachment-info");
    info.append(el("span", "attachment-name", file.name));
    const type = entry.result ? entry.result.content_type : file.type;
    info.append(el("span", "attachment-meta", [formatSize(file.size), type].filter(Boolean).join(" · ")));
    if (entry.state === "uploading") {
      const bar = el("progress", "attachment-progress");
      bar.max = 1;
      bar.value = entry.progress;
      bar.setAttribute("aria-label", `Uploading ${file.name}`);
      info.append(bar);
    } else if (entry.state === "error") {
      const error = el("span", "attachment-error", entry.error);
      error.setAttribute("role", "alert");
      info.append(error);
    }
    const remove = el("button", "attachment-remove", "×");
    remove.type = "button";
    remove.setAttribute("aria-label", `${entry.state === "uploading" ? "Cancel" : "Remove"} ${file.name}`);
    remove.title = entry.state === "uploading" ? "Cancel the upload" : "Remove";
    remove.addEventListener("click", () => this.remove(entry));
    item.append(info, remove);
    entry.node = item;
    return item;
  }
}
