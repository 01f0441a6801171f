// The message box: Enter sends, Shift+Enter starts a new line, Escape stops a running reply.
// Its text and images are cleared only once the server has stored the message, so a failed
// send keeps them.

import { Attachments } from "./attachments.js";
import { autosize, setAttrs } from "./dom.js";

export class Composer {
  /** `onSend(text, images)`: `images` are the attached images' message parts. */
  constructor(form, { onSend, onStop }) {
    this.form = form;
    this.input = form.querySelector("textarea");
    this.sendButton = form.querySelector(".send-btn");
    this.stopButton = form.querySelector(".stop-btn");
    this.isBusy = false;
    this.attachments = new Attachments(
      form.querySelector(".attachments"),
      form.querySelector(".attach-input"),
      form.querySelector(".attach-btn"),
      { onChange: () => this.update() },
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (!this.isBusy && this.hasContent) onSend(this.input.value, this.attachments.parts);
    });
    this.input.addEventListener("keydown", (event) => {
      // During IME composition (Chinese input) Enter picks a candidate; it must not send.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
        event.preventDefault();
        form.requestSubmit();
      } else if (event.key === "Escape" && this.isBusy) {
        onStop();
      }
    });
    this.input.addEventListener("input", () => this.update());
    this.stopButton.addEventListener("click", () => onStop());
    this.update();
  }

  get value() {
    return this.input.value;
  }

  set value(text) {
    this.input.value = text;
    this.update();
  }

  get hasContent() {
    return Boolean(this.input.value.trim()) || this.attachments.count > 0;
  }

  /** Clear the box, unless the reader has already typed or attached something else. */
  clearIf(sentText, sentImages = []) {
    if (this.input.value.trim() === sentText.trim()) this.value = "";
    this.attachments.clearIf(sentImages);
  }

  focus() {
    if (matchMedia("(pointer: fine)").matches) this.input.focus();
  }

  /**
   * Focus the box unless the reader is typing somewhere else: a conversation loads after its
   * title (and rename button) is drawn, and taking the focus from a rename box or a summary
   * form then would close it under the reader's fingers.
   */
  focusIfIdle() {
    const active = document.activeElement;
    const isTypingElsewhere =
      active !== this.input && active?.matches("input, textarea, select, [contenteditable]");
    if (!isTypingElsewhere) this.focus();
  }

  setBusy(isBusy) {
    this.isBusy = isBusy;
    this.sendButton.hidden = isBusy;
    this.stopButton.hidden = !isBusy;
    this.stopButton.disabled = false;
    this.update();
  }

  setStopping() {
    this.stopButton.disabled = true;
  }

  update() {
    autosize(this.input);
    this.sendButton.disabled = !this.hasContent;
  }

  setPlaceholder(key) {
    setAttrs(this.input, { placeholder: key, "aria-label": key });
  }
}
