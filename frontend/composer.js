// The message box: Enter sends, Shift+Enter starts a new line, Escape stops a running reply.
// Its text is cleared only once the server has stored the message, so a failed send keeps it.

import { autosize, setAttrs } from "./dom.js";

export class Composer {
  constructor(form, { onSend, onStop }) {
    this.form = form;
    this.input = form.querySelector("textarea");
    this.sendButton = form.querySelector(".send-btn");
    this.stopButton = form.querySelector(".stop-btn");
    this.isBusy = false;
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (!this.isBusy && this.input.value.trim()) onSend(this.input.value);
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

  /** Clear the box, unless the reader has already typed something else. */
  clearIf(sentText) {
    if (this.input.value.trim() === sentText.trim()) this.value = "";
  }

  focus() {
    if (matchMedia("(pointer: fine)").matches) this.input.focus();
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
    this.sendButton.disabled = !this.input.value.trim();
  }

  setPlaceholder(key) {
    setAttrs(this.input, { placeholder: key, "aria-label": key });
  }
}
