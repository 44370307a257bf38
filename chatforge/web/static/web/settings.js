// Settings page: copy the newly issued token to the clipboard.
"use strict";
document.querySelectorAll("[data-copy]").forEach((button) => {
  button.addEventListener("click", async () => {
    const input = document.getElementById(button.dataset.copy);
    input.select();
    try {
      await navigator.clipboard.writeText(input.value);
      button.textContent = "Copied";
    } catch {
      document.execCommand("copy");
      button.textContent = "Copied";
    }
  });
});
