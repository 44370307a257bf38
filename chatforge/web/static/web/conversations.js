// The sidebar and title bar of the chat page (docs/web.md, "Conversations"):
// the list in date groups with the next page loaded as it scrolls into
// view, pin and archive, the archived view, search (Ctrl+K / ⌘K), rename
// and delete of the open conversation, and the sidebar as a drawer on
// narrow screens. Everything goes through the REST API (GET with
// limit/offset, ?q=, ?archived=1; PATCH; DELETE).

import { api } from "./api.js";

const SEARCH_DELAY_MS = 250;
const PAGE_SIZE = 50;
const DAY_MS = 24 * 60 * 60 * 1000;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// The group a conversation is listed under, by the browser's local date:
// "Pinned", "Today", "Yesterday", "Previous 7 days", "Previous 30 days",
// then "Month YYYY".
export function groupOf(conversation, now = new Date()) {
  if (conversation.pinned_at) return "Pinned";
  const changed = new Date(conversation.updated_at);
  const today = new Date(now.getFullYear(), now.getMonth(), now.getDate());
  const day = new Date(changed.getFullYear(), changed.getMonth(), changed.getDate());
  const days = Math.round((today - day) / DAY_MS); // rounded: a day across a clock change is 23 or 25 hours
  if (days <= 0) return "Today";
  if (days === 1) return "Yesterday";
  if (days <= 7) return "Previous 7 days";
  if (days <= 30) return "Previous 30 days";
  return changed.toLocaleDateString("en", { month: "long", year: "numeric" });
}

function conversationItem(conversation, list) {
  const title = conversation.title || "Untitled";
  const item = el("div", "conversation-item");
  item.dataset.conversationId = conversation.id;
  const link = el("a", "conversation");
  link.href = `/c/${conversation.id}/`;
  link.dataset.conversationId = conversation.id;
  if (conversation.id === list.currentId()) {
    link.classList.add("current");
    link.setAttribute("aria-current", "page");
  }
  link.append(el("span", "title", title));
  if (conversation.archived_at && (list.query || !list.archived)) link.append(el("span", "badge archived-badge", "archived"));
  item.append(link);

  const actions = el("span", "conversation-actions");
  if (!conversation.archived_at) {
    const pin = el("button", "item-action pin-item", conversation.pinned_at ? "Unpin" : "Pin");
    pin.type = "button";
    pin.setAttribute("aria-label", `${conversation.pinned_at ? "Unpin" : "Pin"} “${title}”`);
    pin.addEventListener("click", () => list.update(conversation.id, { pinned: !conversation.pinned_at }));
    actions.append(pin);
  }
  const archive = el("button", "item-action archive-item", conversation.archived_at ? "Restore" : "Archive");
  archive.type = "button";
  archive.setAttribute("aria-label", `${conversation.archived_at ? "Restore" : "Archive"} “${title}”`);
  archive.addEventListener("click", () => list.update(conversation.id, { archived: !conversation.archived_at }));
  actions.append(archive);
  item.append(actions);
  return item;
}

// Conversations read off the server-rendered first page (no request for
// what the page already has).
function fromPage(nav) {
  return [...nav.querySelectorAll(".conversation-item")].map((item) => ({
    id: item.dataset.conversationId,
    title: item.dataset.title,
    updated_at: item.dataset.updatedAt,
    pinned_at: item.dataset.pinnedAt || null,
    archived_at: null,
  }));
}

// The list in the sidebar: what it shows (recent, archived, or a search),
// the conversations loaded so far, and the next page when the end of the
// list scrolls into view.
export class ConversationList {
  constructor({ currentId, onChange = () => {} }) {
    this.nav = document.getElementById("conversation-list");
    this.end = document.getElementById("conversation-list-end");
    this.status = document.getElementById("conversation-list-status");
    this.currentId = currentId;
    this.onChange = onChange; // (conversation) after a pin or archive from the list
    this.query = "";
    this.archived = false;
    this.conversations = fromPage(this.nav);
    this.more = this.nav.dataset.more === "true";
    this.loading = false;
    this.asked = 0;
    this.draw();
    this.observer = new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting)) this.loadMore();
    }, { root: document.getElementById("conversation-sidebar"), rootMargin: "200px" });
    this.observer.observe(this.end);
  }

  params(offset) {
    const params = new URLSearchParams({ source: "chat", limit: String(PAGE_SIZE), offset: String(offset) });
    if (this.query) params.set("q", this.query);
    if (this.archived) params.set("archived", "1");
    return params;
  }

  // Starts over with what the list should show now.
  async reset({ query = this.query, archived = this.archived } = {}) {
    this.query = query;
    this.archived = archived;
    this.conversations = [];
    this.more = true;
    this.loading = false;
    await this.loadMore();
  }

  async loadMore() {
    if (this.loading || !this.more) return;
    this.loading = true;
    const mine = ++this.asked;
    this.status.textContent = "Loading…";
    try {
      const found = await api("GET", `/api/conversations/?${this.params(this.conversations.length)}`);
      if (mine !== this.asked) return; // a later search or view already answered
      this.conversations.push(...found.results);
      this.more = Boolean(found.next);
      this.status.textContent = "";
      this.draw();
    } catch (error) {
      if (mine !== this.asked) return;
      this.status.textContent = "";
      this.nav.replaceChildren(el("p", "error", error.message));
      this.more = false;
    } finally {
      if (mine === this.asked) this.loading = false;
    }
    // Still in view after this page (a tall screen): the observer says so again.
    this.observer.unobserve(this.end);
    this.observer.observe(this.end);
  }

  draw() {
    const groups = [];
    for (const conversation of this.conversations) {
      // A search covers both views: its results go by date, archived ones marked.
      const name = this.archived && !this.query ? "Archived" : groupOf(conversation);
      if (!groups.length || groups[groups.length - 1].name !== name) groups.push({ name, items: [] });
      groups[groups.length - 1].items.push(conversation);
    }
    const sections = groups.map((group, index) => {
      const section = el("section", "conversation-group");
      const heading = el("h2", "conversation-group-heading", group.name);
      heading.id = `conversation-group-${index}`;
      section.setAttribute("aria-labelledby", heading.id);
      section.append(heading, ...group.items.map((c) => conversationItem(c, this)));
      return section;
    });
    if (!sections.length) {
      const none = this.query ? "No conversation matches." : this.archived ? "No archived conversations."
        : "No conversations yet.";
      const note = el("p", "muted", none);
      note.id = "no-conversations";
      sections.push(note);
    }
    this.nav.replaceChildren(...sections);
  }

  // A pin or archive from the list (or the title bar's menu): saved, then
  // the list drawn again from the server (the conversation moves groups).
  async update(conversationId, change) {
    try {
      const saved = await api("PATCH", `/api/conversations/${conversationId}/`, change);
      this.onChange(saved);
      await this.reload();
      return saved;
    } catch (error) {
      this.status.textContent = error.message;
      return null;
    }
  }

  async reload() {
    await this.reset();
  }

  // A conversation made on this page (its first message was just sent).
  add(conversation) {
    if (this.query || this.archived) return;
    this.conversations = [conversation, ...this.conversations.filter((c) => c.id !== conversation.id)]
      .sort((a, b) => Boolean(b.pinned_at) - Boolean(a.pinned_at));
    this.draw();
  }

  rename(conversationId, title) {
    for (const c of this.conversations) if (c.id === conversationId) c.title = title;
    this.draw();
  }
}

// Typing in the search box lists the conversations whose title or messages
// contain the text, archived ones too (marked "archived"); clearing it
// brings back the list it was.
export function setUpSearch(list) {
  const box = document.getElementById("conversation-search");
  let timer = null;
  box.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => list.reset({ query: box.value.trim() }), SEARCH_DELAY_MS);
  });
}

// "Archived" switches the list between the archived conversations (each
// with "Restore") and the others.
export function setUpArchivedToggle(list) {
  const toggle = document.getElementById("show-archived");
  toggle.addEventListener("click", () => {
    const archived = toggle.getAttribute("aria-pressed") !== "true";
    toggle.setAttribute("aria-pressed", String(archived));
    toggle.textContent = archived ? "← All conversations" : "Archived";
    list.reset({ archived });
  });
}

// Ctrl+K (⌘K on a Mac) focuses the search box, opening the drawer first on
// a narrow screen.
export function setUpSearchShortcut(openDrawer) {
  const box = document.getElementById("conversation-search");
  document.addEventListener("keydown", (event) => {
    if (!(event.ctrlKey || event.metaKey) || event.shiftKey || event.altKey || event.key.toLowerCase() !== "k") return;
    event.preventDefault();
    openDrawer();
    box.focus();
    box.select();
  });
}

// "Rename" turns the title into a field: Enter saves (PATCH), Esc cancels.
// ``currentId()`` is the open conversation's id (a new one gets it when its
// first message is sent).
export function setUpRename(currentId, onError, list) {
  const renameButton = document.getElementById("rename-conversation");
  const heading = document.getElementById("conversation-title");
  renameButton.addEventListener("click", () => {
    const field = document.createElement("input");
    field.id = "conversation-title-input";
    field.value = heading.textContent;
    field.maxLength = 200;
    field.setAttribute("aria-label", "Conversation title");
    heading.hidden = true;
    heading.after(field);
    field.focus();
    field.select();
    const done = () => { field.remove(); heading.hidden = false; };
    field.addEventListener("keydown", async (event) => {
      if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); done(); return; }
      if (event.key !== "Enter") return;
      event.preventDefault();
      try {
        const conversationId = currentId();
        const saved = await api("PATCH", `/api/conversations/${conversationId}/`, { title: field.value });
        const title = saved.title || "Untitled";
        heading.textContent = title;
        document.title = `${title} · ChatForge`;
        list.rename(conversationId, saved.title);
        done();
      } catch (error) {
        onError(error.message);
      }
    });
  });
}

// "Delete" asks first; the server cancels the conversation's running answer.
export function setUpDelete(currentId, onError) {
  const deleteButton = document.getElementById("delete-conversation");
  deleteButton.addEventListener("click", async () => {
    if (!window.confirm("Delete this conversation and all its messages? A running answer is stopped.")) return;
    try {
      await api("DELETE", `/api/conversations/${currentId()}/`);
      window.location.href = "/";
    } catch (error) {
      onError(error.message);
    }
  });
}

// Below ~800 px the sidebar is a drawer opened by the ☰ button. Returns a
// function that opens it.
export function setUpDrawer() {
  const toggle = document.getElementById("sidebar-toggle");
  const sidebar = document.getElementById("conversation-sidebar");
  const setOpen = (open) => {
    document.body.classList.toggle("sidebar-open", open);
    toggle.setAttribute("aria-expanded", String(open));
  };
  toggle.addEventListener("click", () => setOpen(!document.body.classList.contains("sidebar-open")));
  sidebar.addEventListener("click", (event) => { if (event.target.closest("a")) setOpen(false); });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && document.body.classList.contains("sidebar-open")) setOpen(false);
  });
  return () => { if (getComputedStyle(toggle).display !== "none") setOpen(true); };
}

// Shown once the conversation exists (after its first message).
export function showConversationButtons() {
  document.getElementById("conversation-menu-button").hidden = false;
}
