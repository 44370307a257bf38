/* The tool definition form shows only the fieldsets of the chosen kind: each kind's fieldset has the class
   cf-kind-<kind> (ToolDefinitionAdmin.fieldsets). A file, not an inline script: the Content-Security-Policy
   (script-src 'self') blocks inline scripts. Without JavaScript every fieldset shows, each saying which kind
   it is for. */
"use strict";
(function () {
  function update(select) {
    document.querySelectorAll("fieldset[class*='cf-kind-']").forEach(function (fieldset) {
      var chosen = select.value === "" || fieldset.classList.contains("cf-kind-" + select.value);
      fieldset.classList.toggle("cf-kind-hidden", !chosen);
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var select = document.getElementById("id_kind");
    if (!select) {
      return;
    }
    update(select);
    select.addEventListener("change", function () { update(select); });
  });
})();
