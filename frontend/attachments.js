// Images attached in the composer: picked with the file picker, checked against the server's
// limits (backend/api/user_input.py), read as base64 and shown as thumbnails until sent.
// Each becomes a `{"type": "image", "media_type", "data"}` part of the message.

import { h, icon, toast } from "./dom.js";

export const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
export const MAX_IMAGE_BYTES = 5 * 1024 * 1024;
export const MAX_IMAGES = 8;

/** The file's bytes as base64 (without the `data:` prefix). */
function readBase64(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ""));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

export class Attachments {
  /** `strip`: where thumbnails go; `input`: a hidden file input; `onChange()`: after each change. */
  constructor(strip, input, button, { onChange }) {
    this.strip = strip;
    this.input = input;
    this.onChange = onChange;
    this.images = [];
    input.accept = IMAGE_TYPES.join(",");
    button.addEventListener("click", () => input.click());
    input.addEventListener("change", async () => {
      const files = [...input.files];
      input.value = ""; // picking the same file again still fires `change`
      await this.add(files);
    });
  }

  get count() {
    return this.images.length;
  }

  /** The message parts to send. */
  get parts() {
    return this.images.map(({ media_type, data }) => ({ type: "image", media_type, data }));
  }

  async add(files) {
    for (const file of files) {
      if (!IMAGE_TYPES.includes(file.type)) {
        toast(["imageType", { name: file.name }], { isError: true });
      } else if (file.size > MAX_IMAGE_BYTES) {
        toast(["imageTooLarge", { name: file.name }], { isError: true });
      } else if (this.images.length >= MAX_IMAGES) {
        toast(["tooManyImages", { n: MAX_IMAGES }], { isError: true });
        break;
      } else {
        try {
          const data = await readBase64(file);
          this.images.push({ media_type: file.type, data, name: file.name });
        } catch {
          toast(["imageUnreadable", { name: file.name }], { isError: true });
        }
      }
    }
    this.render();
  }

  /** Let go of the images if they are the ones that were sent (`sent`: their parts). */
  clearIf(sent) {
    const isSame =
      sent.length === this.images.length && sent.every((p, i) => p.data === this.images[i].data);
    if (isSame && sent.length) {
      this.images = [];
      this.render();
    }
  }

  remove(index) {
    this.images.splice(index, 1);
    this.render();
  }

  render() {
    this.strip.hidden = this.images.length === 0;
    this.strip.replaceChildren(
      ...this.images.map((image, index) =>
        h(
          "figure",
          { class: "attachment", dataset: { testid: "attachment" }, title: image.name },
          h("img", { src: `data:${image.media_type};base64,${image.data}`, alt: image.name }),
          h(
            "button",
            {
              type: "button",
              class: "attachment-remove",
              tAttrs: { title: "removeImage", "aria-label": "removeImage" },
              onclick: () => this.remove(index),
            },
            icon("x"),
          ),
        ),
      ),
    );
    this.onChange();
  }
}
