// "Share…" in the title bar's menu (docs/web.md, "Sharing"): a modal
// dialog with the conversation's links. "Create a link" makes one (a
// snapshot of the conversation as it is now: POST …/shares/), shown with a
// Copy button; the list below has every link made, each active one with
// "Revoke" (DELETE …/shares/{id}/). A native <dialog> opened as a modal:
// the rest of the page is inert while it is open and Tab goes round its
// controls, Esc closes it, and the focus goes back to the menu button.

import { api } from "./api.js";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

async function copy(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Select and copy";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
}

export function setUpShareDialog(currentId) {
  const dialog = document.getElementById("share-dialog");
  const current = document.getElementById("share-current");
  const linkField = document.getElementById("share-link");
  const copyButton = document.getElementById("share-copy");
  const createButton = document.getElementById("share-create");
  const list = document.getElementById("share-list");
  const errorEl = document.getElementById("share-error");
  let returnTo = null;

  const showError = (text) => { errorEl.textContent = text; errorEl.hidden = !text; };
  const base = () => `/api/conversations/${currentId()}/shares/`;

  const showLink = (share) => {
    current.hidden = !share;
    linkField.value = share ? share.url : "";
  };

  const row = (share) => {
    const item = el("li", "share-item");
    item.dataset.shareId = share.id;
    const made = new Date(share.created_at).toLocaleString();
    const text = el("span", "share-item-text");
    text.append(el("span", "", `Made ${made}`));
    if (share.revoked_at) {
      item.classList.add("revoked");
      text.append(el("span", "badge", `revoked ${new Date(share.revoked_at).toLocaleString()}`));
      item.append(text);
      return item;
    }
    text.append(el("span", "share-item-url mono", share.url));
    const copyOne = el("button", "msg-action", "Copy");
    copyOne.type = "button";
    copyOne.setAttribute("aria-label", `Copy the link made ${made}`);
    copyOne.addEventListener("click", () => copy(share.url, copyOne));
    const revoke = el("button", "msg-action danger", "Revoke");
    revoke.type = "button";
    revoke.setAttribute("aria-label", `Revoke the link made ${made}`);
    revoke.addEventListener("click", async () => {
      revoke.disabled = true;
      try {
        await api("DELETE", `${base()}${share.id}/`);
        if (linkField.value === share.url) showLink(null);
        await load();
        createButton.focus();
      } catch (error) {
        revoke.disabled = false;
        showError(error.message);
      }
    });
    item.append(text, copyOne, revoke);
    return item;
  };

  async function load() {
    try {
      const shares = await api("GET", base());
      list.replaceChildren(...shares.map(row));
      if (!shares.length) list.append(el("li", "muted", "No links yet."));
    } catch (error) {
      showError(error.message);
    }
  }

  createButton.addEventListener("click", async () => {
    createButton.disabled = true;
    showError("");
    try {
      const share = await api("POST", base());
      showLink(share);
      await load();
      linkField.focus();
      linkField.select();
    } catch (error) {
      showError(error.message);
    } finally {
      createButton.disabled = false;
    }
  });
  copyButton.addEventListener("click", () => copy(linkField.value, copyButton));
  document.getElementById("share-close").addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", () => {
    const target = returnTo && returnTo.isConnected ? returnTo : document.getElementById("conversation-menu-button");
    target.focus();
  });
  // Tab and Shift+Tab go round the dialog's controls (a modal dialog alone
  // lets the focus leave for the browser's own bar after the last one).
  dialog.addEventListener("keydown", (event) => {
    if (event.key !== "Tab") return;
    const controls = [...dialog.querySelectorAll("button, input, a[href]")]
      .filter((node) => !node.disabled && node.getClientRects().length);
    if (!controls.length) return;
    const first = controls[0];
    const last = controls[controls.length - 1];
    if (event.shiftKey && document.activeElement === first) { event.preventDefault(); last.focus(); }
    else if (!event.shiftKey && document.activeElement === last) { event.preventDefault(); first.focus(); }
  });
  // A click on the backdrop (outside the dialog's box) closes it too.
  dialog.addEventListener("click", (event) => {
    if (event.target !== dialog) return;
    const box = dialog.getBoundingClientRect();
    const inside = event.clientX >= box.left && event.clientX <= box.right
      && event.clientY >= box.top && event.clientY <= box.bottom;
    if (!inside) dialog.close();
  });

  document.getElementById("share-conversation").addEventListener("click", () => {
    returnTo = document.getElementById("conversation-menu-button");
    showError("");
    showLink(null);
    list.replaceChildren();
    dialog.showModal();
    createButton.focus();
    load();
  });
}
