// The title bar's "⋯" menu (docs/web.md, "The title bar"): Rename, Pin,
// Archive, Export, Share and Delete of the open conversation, in one button
// so the bar stays one line on a phone. A menu button as ARIA describes it:
// Enter, Space or ↓ opens it on the first item (↑ on the last), the arrows,
// Home and End move, Esc closes it and gives the focus back to the button,
// Tab or a click elsewhere closes it. The items are buttons: each item's
// own handler (conversations.js, share_dialog.js) does the work.

import { api } from "./api.js";

export function setUpMenu(button, menu) {
  const items = () => [...menu.querySelectorAll('[role="menuitem"]:not([hidden])')];
  const isOpen = () => !menu.hidden;

  const close = ({ focusButton = false } = {}) => {
    if (!isOpen()) return;
    menu.hidden = true;
    button.setAttribute("aria-expanded", "false");
    if (focusButton) button.focus();
  };
  const open = (which = "first") => {
    menu.hidden = false;
    button.setAttribute("aria-expanded", "true");
    const all = items();
    (which === "last" ? all[all.length - 1] : all[0])?.focus();
  };

  button.addEventListener("click", () => (isOpen() ? close() : open()));
  button.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown") { event.preventDefault(); open("first"); }
    else if (event.key === "ArrowUp") { event.preventDefault(); open("last"); }
  });
  menu.addEventListener("keydown", (event) => {
    const all = items();
    const at = all.indexOf(document.activeElement);
    const move = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: all.length - 1 }[event.key];
    if (move !== undefined) {
      event.preventDefault();
      all[(move + all.length) % all.length].focus();
    } else if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      close({ focusButton: true });
    } else if (event.key === "Tab") {
      close();
    }
  });
  // An item chosen: the menu closes first, then the item's own click handler runs.
  menu.addEventListener("click", (event) => { if (event.target.closest('[role="menuitem"]')) close(); }, true);
  document.addEventListener("click", (event) => {
    if (isOpen() && !menu.contains(event.target) && !button.contains(event.target)) close();
  });
  return { close };
}

// Pin/Unpin and Archive/Restore of the open conversation; their labels
// follow its state. ``list`` is the sidebar (conversations.js), drawn again
// after each change.
export function setUpConversationState({ currentId, conversation, list, onError }) {
  const pin = document.getElementById("pin-conversation");
  const archive = document.getElementById("archive-conversation");
  const state = { pinned_at: conversation?.pinned_at || null, archived_at: conversation?.archived_at || null };
  const draw = () => {
    pin.textContent = state.pinned_at ? "Unpin" : "Pin";
    archive.textContent = state.archived_at ? "Restore" : "Archive";
  };
  const change = async (body) => {
    try {
      const saved = await api("PATCH", `/api/conversations/${currentId()}/`, body);
      Object.assign(state, { pinned_at: saved.pinned_at, archived_at: saved.archived_at });
      draw();
      await list.reload();
    } catch (error) {
      onError(error.message);
    }
  };
  pin.addEventListener("click", () => change({ pinned: !state.pinned_at }));
  archive.addEventListener("click", () => change({ archived: !state.archived_at }));
  draw();
  // A pin or archive from the sidebar of the open conversation.
  return (saved) => {
    if (saved.id !== currentId()) return;
    Object.assign(state, { pinned_at: saved.pinned_at, archived_at: saved.archived_at });
    draw();
  };
}

// Export Markdown / JSON: the browser downloads the API's answer (an
// attachment named after the title), signed in by the page's cookie.
export function setUpExport(currentId) {
  for (const [id, format] of [["export-markdown", "markdown"], ["export-json", "json"]]) {
    document.getElementById(id).addEventListener("click", () => {
      const link = document.createElement("a");
      link.href = `/api/conversations/${currentId()}/export/?format=${format}`;
      link.download = "";
      document.body.append(link);
      link.click();
      link.remove();
    });
  }
}
