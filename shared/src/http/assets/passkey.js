// Countersign's one script: WebAuthn on the passkeys page (register) and on the review page of
// a passkey-only approval (sign the vote's statement). It reads what the server put in the
// form's data attributes, asks the browser's authenticator, and posts the form; the server
// checks everything. Allowed by its hash in the page's Content-Security-Policy.
(function () {
  "use strict";
  function bytes(text) {
    var b64 = text.replace(/-/g, "+").replace(/_/g, "/");
    while (b64.length % 4) { b64 += "="; }
    var raw = atob(b64), out = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) { out[i] = raw.charCodeAt(i); }
    return out;
  }
  function text(buffer) {
    var view = new Uint8Array(buffer), raw = "";
    for (var i = 0; i < view.length; i++) { raw += String.fromCharCode(view[i]); }
    return btoa(raw).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function say(form, message) {
    var status = form.querySelector(".passkey-status");
    if (status) { status.textContent = message; }
  }
  var add = document.getElementById("passkey-add");
  if (add) {
    add.addEventListener("click", function (event) {
      event.preventDefault();
      var form = add.form;
      var options = JSON.parse(form.dataset.options).publicKey;
      options.challenge = bytes(options.challenge);
      options.user.id = bytes(options.user.id);
      (options.excludeCredentials || []).forEach(function (c) { c.id = bytes(c.id); });
      navigator.credentials.create({ publicKey: options }).then(function (c) {
        form.elements.credential.value = JSON.stringify({
          id: c.id, rawId: text(c.rawId), type: c.type, extensions: {},
          response: {
            attestationObject: text(c.response.attestationObject),
            clientDataJSON: text(c.response.clientDataJSON)
          }
        });
        form.submit();
      }, function (error) { say(form, "No passkey was added: " + error.message); });
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll("button[data-challenge]"), function (button) {
    button.addEventListener("click", function (event) {
      event.preventDefault();
      var form = button.form;
      var allow = JSON.parse(form.dataset.credentials).map(function (id) {
        return { type: "public-key", id: bytes(id) };
      });
      navigator.credentials.get({ publicKey: {
        challenge: bytes(button.dataset.challenge), rpId: form.dataset.rpId,
        allowCredentials: allow, userVerification: "required", timeout: 120000
      } }).then(function (a) {
        form.elements.decision.value = button.value;
        form.elements.credential_id.value = text(a.rawId);
        form.elements.authenticator_data.value = text(a.response.authenticatorData);
        form.elements.client_data_json.value = text(a.response.clientDataJSON);
        form.elements.signature.value = text(a.response.signature);
        form.submit();
      }, function (error) { say(form, "Nothing was signed: " + error.message); });
    });
  });
})();
