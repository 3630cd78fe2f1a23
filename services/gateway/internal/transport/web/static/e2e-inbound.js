// shipfile web UI: end-to-end encryption of file requests (docs/WEB-UI.md,
// "End-to-end encrypted file requests"). Three parts, each active only on its page:
//
//   - the account page's "Encryption key" section: makes the owner's age X25519
//     identity in the browser, seals it with a passphrase (age scrypt, armored) and
//     PUTs {public_key, sealed_identity} to /api/v1/me/key; exports the key as an age
//     key file after the passphrase;
//   - the request link's page of an encrypted request: encrypts every file (and its
//     name, type and size, in the tus metadata "manifest") to the owner's public key
//     before it leaves, then uploads the ciphertext through tus;
//   - the owner's page of an encrypted request: after the passphrase (never sent),
//     unseals the identity, shows the real names and sizes and decrypts downloads.
//
// The passphrase and the unsealed identity never leave the browser; the identity is
// kept in sessionStorage only (this tab, until it closes or "Lock"). The age calls,
// the ciphertext's chunking for tus and the error kinds are static/e2e.js's
// (self.shipfileE2E), shared with the outbound pages.
(function () {
  "use strict";

  var E2E = self.shipfileE2E;
  if (!E2E) return;

  var meta = document.querySelector('meta[name="csrf-token"]');
  var csrf = meta ? meta.getAttribute("content") : "";
  var identityKey = "shipfile.e2e.identity";

  // The age library itself (npm age-encryption 0.3.1, from /static/docs/e2e.bundle.js),
  // for its armor: the sealed identity is stored armored.
  function lib() {
    var a = self.shipfileVendor && self.shipfileVendor.age;
    if (!a) throw new Error("the encryption library did not load");
    return a;
  }

  // human is app.js's size format (app.js runs first: both are deferred, it comes
  // earlier in the page).
  var human = self.shipfileHuman;

  function b64(bytes) {
    var s = "";
    for (var i = 0; i < bytes.length; i += 0x8000) {
      s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return btoa(s);
  }

  function unb64(s) {
    var bin = atob(s);
    var out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  function show(el, on) { if (el) el.hidden = !on; }

  function say(el, text, kind) {
    if (!el) return;
    el.textContent = text;
    el.hidden = !text;
    if (kind) el.setAttribute("data-kind", kind); else el.removeAttribute("data-kind");
  }

  // api calls the REST API with the session cookie (and the CSRF token on unsafe
  // methods); it resolves to {status, body} and rejects only when the network fails.
  function api(method, url, body) {
    var init = { method: method, credentials: "same-origin", headers: { "Accept": "application/json" } };
    if (method !== "GET" && method !== "HEAD") init.headers["X-CSRF-Token"] = csrf;
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(url, init).then(function (res) {
      return res.text().then(function (t) {
        var parsed = null;
        try { parsed = t ? JSON.parse(t) : null; } catch (e) { /* not JSON */ }
        return { status: res.status, body: parsed };
      });
    });
  }

  function detailOf(r) {
    return (r.body && r.body.detail) || ("the server answered " + r.status);
  }

  // WrongPassphrase is what unseal throws when the passphrase does not open the key.
  function WrongPassphrase() { this.message = "Wrong passphrase: it does not open your encryption key."; }

  // fetchKey gets the owner's key: null when there is none.
  function fetchKey() {
    return api("GET", "/api/v1/me/key").then(function (r) {
      if (r.status === 404) return null;
      if (r.status !== 200) throw new Error(detailOf(r));
      return r.body;
    });
  }

  // unseal opens the sealed identity with the passphrase and checks that it is the
  // key of the public key beside it.
  function unseal(key, passphrase) {
    var age = lib();
    var sealed;
    try {
      sealed = age.armor.decode(key.sealed_identity);
    } catch (e) {
      return Promise.reject(new Error("the stored key is damaged: " + e.message));
    }
    return E2E.decryptBytes(sealed, { passphrase: passphrase }).then(function (plain) {
      var m = /AGE-SECRET-KEY-1[0-9A-Z]+/.exec(new TextDecoder().decode(plain));
      if (!m) throw new Error("the stored key holds no age identity");
      return age.identityToRecipient(m[0]).then(function (pub) {
        if (pub !== key.public_key) throw new Error("the stored key does not match its public key");
        return m[0];
      });
    }, function (e) {
      if (e && e.kind === "key") throw new WrongPassphrase();
      throw e;
    });
  }

  function keyFile(key, identity) {
    return "# created: " + (key.created_at || new Date().toISOString()) + "\n" +
      "# public key: " + key.public_key + "\n" + identity + "\n";
  }

  function saveBlob(blob, name) {
    var url = URL.createObjectURL(blob);
    var a = document.createElement("a");
    a.href = url;
    a.download = name;
    a.rel = "noopener";
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 60000);
  }

  // ---------------------------------------------------------------- account page

  function accountKey(root) {
    var status = root.querySelector("#e2e-key-status");
    var none = root.querySelector("[data-e2e-none]");
    var some = root.querySelector("[data-e2e-some]");

    function render(key) {
      root.setAttribute("data-state", key ? "some" : "none");
      show(root.querySelector("[data-e2e-loading]"), false);
      show(none, !key);
      show(some, !!key);
      if (key) {
        root.querySelector("#e2e-public-key").value = key.public_key;
        var created = root.querySelector("#e2e-key-created");
        if (created) created.textContent = key.created_at ? new Date(key.created_at).toISOString().slice(0, 16).replace("T", " ") + " UTC" : "";
      }
    }

    function create(form, passInput, againInput, ack) {
      var err = form.querySelector(".field-error");
      var button = form.querySelector("button[type=submit]");
      form.addEventListener("submit", function (e) {
        e.preventDefault();
        say(err, "");
        var pass = passInput.value, again = againInput.value;
        if (pass.length < 10) { say(err, "Choose a passphrase of at least 10 characters."); passInput.focus(); return; }
        if (pass !== again) { say(err, "The two passphrases differ."); againInput.focus(); return; }
        if (ack && !ack.checked) { say(err, "Tick the box to confirm that earlier requests stay sealed to the old key."); return; }
        var age;
        try { age = lib(); } catch (x) { say(err, x.message); return; }
        button.disabled = true;
        say(status, "Making your key and sealing it with your passphrase (a few seconds)…", "busy");
        var recipient;
        E2E.generateIdentity().then(function (k) {
          recipient = k.recipient;
          return E2E.encryptBytes(k.identity, { passphrase: pass });
        }).then(function (sealed) {
          return api("PUT", "/api/v1/me/key", { public_key: recipient, sealed_identity: age.armor.encode(sealed) });
        }).then(function (r) {
          button.disabled = false;
          if (r.status !== 200 && r.status !== 201) {
            say(status, "");
            say(err, "Could not save the key: " + detailOf(r));
            return;
          }
          passInput.value = "";
          againInput.value = "";
          if (ack) ack.checked = false;
          var d = form.closest("details");
          if (d) d.open = false;
          sessionStorage.removeItem(identityKey);
          render(r.body);
          say(status, (ack ? "New key created. " : "Key created. ") +
            "Keep your passphrase safe: without it nobody, not even an administrator, can open the files sent to this key.", "ok");
        }, function (x) {
          button.disabled = false;
          say(status, "");
          say(err, "Could not make the key: " + (x && x.message ? x.message : x));
        });
      });
    }

    var createForm = root.querySelector("#e2e-create");
    if (createForm) create(createForm, root.querySelector("#e2e-pass"), root.querySelector("#e2e-pass2"), null);
    var replaceForm = root.querySelector("#e2e-replace");
    if (replaceForm) create(replaceForm, root.querySelector("#e2e-new-pass"), root.querySelector("#e2e-new-pass2"), root.querySelector("#e2e-replace-ack"));

    var exportForm = root.querySelector("#e2e-export");
    if (exportForm) {
      exportForm.addEventListener("submit", function (e) {
        e.preventDefault();
        var err = exportForm.querySelector(".field-error");
        var button = exportForm.querySelector("button[type=submit]");
        var pass = root.querySelector("#e2e-export-pass");
        say(err, "");
        button.disabled = true;
        say(status, "Opening your key…", "busy");
        fetchKey().then(function (key) {
          if (!key) throw new Error("you have no key");
          return unseal(key, pass.value).then(function (identity) {
            saveBlob(new Blob([keyFile(key, identity)], { type: "text/plain" }), "shipfile-age-key.txt");
            pass.value = "";
            button.disabled = false;
            say(status, "Key exported as shipfile-age-key.txt: keep it as safe as the files. Decrypt a downloaded file with: age -d -i shipfile-age-key.txt file-1.age > file", "ok");
          });
        }).catch(function (x) {
          button.disabled = false;
          say(status, "");
          say(err, x instanceof WrongPassphrase ? x.message : "Could not export the key: " + (x && x.message ? x.message : x));
        });
      });
    }

    fetchKey().then(render, function (x) {
      show(root.querySelector("[data-e2e-loading]"), false);
      say(status, "Could not load your key: " + x.message);
    });
  }

  // ------------------------------------------------ request link page (uploading)

  // Each request (PATCH) carries this much ciphertext; a retry after a drop resends
  // at most this from memory (the part the server has not got yet).
  var chunkSize = 8 << 20;

  // uploadZone is the request link's upload zone (app.js's shipfileUploadZone): each
  // file's manifest entry and the file itself are encrypted to the requester's key
  // and the ciphertext goes up through tus as it is made.
  function uploadZone(zone) {
    var recipient = zone.getAttribute("data-public-key");
    self.shipfileUploadZone(zone, function (job, tus) {
      var file = job.file, r = job.row;
      if (!/^age1[0-9a-z]+$/.test(recipient || "")) throw new Error("the request has no encryption key to encrypt to");
      if (!window.tus || !window.tus.isSupported) throw new Error("this browser cannot upload here (no tus)");
      r.li.setAttribute("data-state", "encrypting");
      r.li.setAttribute("data-encrypted", "1");
      r.stats.textContent = (window.shipfileMsg ? window.shipfileMsg("encrypting_short", "encrypting") : "encrypting") + " · " + human(file.size);
      var key = { recipients: [recipient] };
      var entry = JSON.stringify({ name: file.name, type: file.type || "application/octet-stream", size: file.size });
      return E2E.encryptBytes(entry, key).then(function (sealedEntry) {
        return E2E.encryptFile(file, key).then(function (enc) {
          return tus({
            input: E2E.blobChunks(enc.stream).getReader(),
            uploadSize: enc.size,
            chunkSize: chunkSize,
            // The server keeps no client file name for an encrypted package: the
            // real name travels only inside the encrypted manifest entry.
            metadata: { filename: "encrypted.age", filetype: "application/octet-stream", manifest: b64(sealedEntry) }
          });
        });
      });
    });
  }

  // ------------------------------------------------ owner's package page (reading)

  function ownerFiles(root) {
    var form = root.querySelector("#e2e-unlock");
    var pass = root.querySelector("#e2e-unlock-pass");
    var err = root.querySelector("#e2e-unlock-error");
    var status = root.querySelector("#e2e-unlock-status");
    var lock = root.querySelector("#e2e-lock");
    // The boxes around the form and the button are shown and hidden: the form and the
    // button have display rules of their own, which [hidden] does not beat.
    var formBox = root.querySelector("#e2e-unlock-box");
    var lockBox = root.querySelector("#e2e-lock-box");
    var identity = null;

    function rows() { return Array.prototype.slice.call(root.querySelectorAll("tr[data-file-id]")); }

    function apply(id) {
      identity = id;
      root.setAttribute("data-unlocked", "1");
      show(formBox, false);
      show(lockBox, true);
      var pending = rows().map(function (tr) {
        var nameEl = tr.querySelector(".e2e-name");
        var sizeEl = tr.querySelector(".e2e-size");
        var m = tr.getAttribute("data-manifest");
        if (!m) {
          tr.setAttribute("data-e2e", "no-manifest");
          return Promise.resolve();
        }
        return E2E.decryptBytes(unb64(m), { identity: id }).then(function (plain) {
          var entry = JSON.parse(new TextDecoder().decode(plain));
          if (typeof entry.name !== "string" || entry.name === "") throw new Error("no name");
          tr.setAttribute("data-e2e", "open");
          tr.setAttribute("data-name", entry.name);
          tr.setAttribute("data-type", entry.type || "application/octet-stream");
          if (typeof entry.size === "number") tr.setAttribute("data-plain-size", String(entry.size));
          nameEl.textContent = entry.name;
          if (sizeEl && typeof entry.size === "number") sizeEl.textContent = human(entry.size);
        }).catch(function () {
          tr.setAttribute("data-e2e", "other-key");
          nameEl.textContent = tr.getAttribute("data-neutral") + " (sealed to another key)";
        });
      });
      return Promise.all(pending).then(function () {
        root.setAttribute("data-names", "1");
        show(allBox, root.querySelectorAll('tr[data-e2e="open"]').length > 1);
        var others = root.querySelectorAll('tr[data-e2e="other-key"]').length;
        say(status, others ? others + " file(s) are sealed to another key (an earlier one?): download them as they are and decrypt them with that key." : "", others ? "warn" : null);
        previews(id);
      });
    }

    // previews draws the thumbnails of the opened images (static/e2e.js): the owner's
    // downloads count nothing, so they are fetched at once. Locking drops them.
    function previews(id) {
      var items = [];
      rows().forEach(function (tr) {
        var a = tr.querySelector("a.e2e-download");
        var nameEl = tr.querySelector(".e2e-name");
        var m = { name: tr.getAttribute("data-name"), type: tr.getAttribute("data-type"), size: Number(tr.getAttribute("data-plain-size")) };
        if (tr.getAttribute("data-e2e") !== "open" || !a || !nameEl || !E2E.previewable(m)) return;
        items.push({ el: tr, url: a.href, name: m.name, place: function (c) {
          if (identity !== id) return false;
          nameEl.parentNode.insertBefore(c, nameEl);
          nameEl.parentNode.insertBefore(document.createTextNode(" "), nameEl);
        } });
      });
      if (items.length) E2E.showPreviews(items, { identity: id });
    }

    function relock() {
      identity = null;
      sessionStorage.removeItem(identityKey);
      root.removeAttribute("data-unlocked");
      root.removeAttribute("data-names");
      root.querySelectorAll("canvas.e2e-preview").forEach(function (c) {
        if (c.nextSibling && c.nextSibling.nodeType === 3) c.nextSibling.remove();
        c.remove();
      });
      rows().forEach(function (tr) {
        tr.removeAttribute("data-e2e");
        tr.removeAttribute("data-preview");
        tr.removeAttribute("data-preview-why");
        tr.querySelector(".e2e-name").textContent = tr.getAttribute("data-neutral");
        var sizeEl = tr.querySelector(".e2e-size");
        if (sizeEl) sizeEl.textContent = sizeEl.getAttribute("data-neutral");
      });
      show(formBox, true);
      show(lockBox, false);
      show(allBox, false);
      say(status, "");
    }

    if (form) {
      form.addEventListener("submit", function (e) {
        e.preventDefault();
        say(err, "");
        var button = form.querySelector("button[type=submit]");
        button.disabled = true;
        say(status, "Opening your key…", "busy");
        fetchKey().then(function (key) {
          if (!key) throw new Error("you have no encryption key: files of this request cannot be opened here");
          return unseal(key, pass.value).then(function (id) {
            sessionStorage.setItem(identityKey, JSON.stringify({ public_key: key.public_key, identity: id }));
            pass.value = "";
            say(status, "");
            return apply(id);
          });
        }).then(function () {
          button.disabled = false;
        }, function (x) {
          button.disabled = false;
          say(status, "");
          say(err, x instanceof WrongPassphrase ? x.message : "Could not open your key: " + (x && x.message ? x.message : x));
          pass.focus();
        });
      });
    }
    if (lock) lock.addEventListener("click", relock);

    // Downloads: with the key open, a click decrypts the file to disk; without it the
    // link downloads the encrypted file as it is (age -d -i key.txt decrypts it).
    root.addEventListener("click", function (e) {
      var a = e.target.closest && e.target.closest("a.e2e-download");
      if (!a || !identity) return;
      var tr = a.closest("tr");
      if (!tr || tr.getAttribute("data-e2e") !== "open") return;
      e.preventDefault();
      download(a, tr);
    });

    function download(a, tr) {
      var name = tr.getAttribute("data-name");
      var type = tr.getAttribute("data-type");
      var size = Number(tr.getAttribute("data-plain-size"));
      var state = tr.querySelector(".e2e-state");
      tr.setAttribute("data-download", "running");
      say(state, "decrypting…");
      var p;
      if ("serviceWorker" in navigator) {
        // The shared service worker decrypts the stream to disk as it comes.
        p = viaWorker({ url: a.href, name: name, type: type, size: isNaN(size) ? undefined : size, key: { identity: identity } }, state);
      } else {
        p = fallbackDownload(a.href, name, type, size);
      }
      p.then(function () {
        tr.setAttribute("data-download", "done");
        say(state, "");
      }, function (x) {
        tr.setAttribute("data-download", "error");
        say(state, "failed: " + failure(x));
      });
    }

    // failure says why a download failed: the worker's {kind, message} or an E2EError
    // (static/e2e.js's kinds and messages).
    function failure(x) {
      if (x && x.kind === "key") return "your key does not open this file (it is sealed to another key)";
      if (x && x.kind && E2E.messages[x.kind]) return E2E.messages[x.kind];
      return x && x.message ? x.message : String(x);
    }

    // viaWorker hands one job (a file, or a zip of several) to the shared download
    // worker and settles when the browser has the whole file.
    function viaWorker(job, state) {
      return new Promise(function (resolve, reject) {
        E2E.saveViaWorker(job, function (m) {
          if (m.type === "progress") say(state, "decrypting… " + human(m.bytes));
          else if (m.type === "done") resolve();
          else if (m.type === "error") reject(m);
        }).catch(reject);
      });
    }

    // Download all: a zip made in the browser of every file the key opens.
    var all = root.querySelector("#e2e-download-all");
    var allBox = root.querySelector("#e2e-download-all-box");
    if (all) {
      all.addEventListener("click", function () {
        var open = rows().filter(function (tr) { return tr.getAttribute("data-e2e") === "open"; });
        var state = root.querySelector("#e2e-download-all-state");
        if (!identity || open.length === 0) return;
        if (!("serviceWorker" in navigator)) {
          say(state, "This browser cannot build the zip here: download the files one by one.");
          return;
        }
        var files = open.map(function (tr) {
          var n = Number(tr.getAttribute("data-plain-size"));
          return { url: tr.querySelector("a.e2e-download").href, name: tr.getAttribute("data-name"), size: isNaN(n) ? undefined : n };
        });
        all.disabled = true;
        root.setAttribute("data-zip", "running");
        say(state, "decrypting…");
        viaWorker({ zip: (root.getAttribute("data-title") || "files") + ".zip", files: files, key: { identity: identity } }, state).then(function () {
          all.disabled = false;
          root.setAttribute("data-zip", "done");
          say(state, "");
        }, function (x) {
          all.disabled = false;
          root.setAttribute("data-zip", "error");
          say(state, "failed: " + failure(x));
        });
      });
    }

    // fallbackDownload decrypts in memory (up to fallbackLimit) when the shared
    // service worker is not available (no service workers in this browser).
    var fallbackLimit = 512 << 20;
    function fallbackDownload(url, name, type, size) {
      if (size > fallbackLimit) {
        return Promise.reject(new Error("this browser cannot decrypt a file over " + human(fallbackLimit) + " here: download it as it is and run age -d with your exported key"));
      }
      return E2E.fetchDecrypt(url, { identity: identity }).then(function (got) {
        return new Response(got.stream).blob();
      }).then(function (blob) {
        saveBlob(new Blob([blob], { type: type || "application/octet-stream" }), name);
      });
    }

    // The key stays open in this tab: sessionStorage holds it until the tab closes.
    var saved = null;
    try { saved = JSON.parse(sessionStorage.getItem(identityKey) || "null"); } catch (e) { saved = null; }
    if (saved && saved.identity) {
      apply(saved.identity).catch(function () { relock(); });
    }
  }

  document.querySelectorAll("[data-e2e-key]").forEach(accountKey);
  document.querySelectorAll("[data-e2e-upload]").forEach(uploadZone);
  document.querySelectorAll("[data-e2e-files]").forEach(ownerFiles);
})();
