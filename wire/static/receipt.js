// The receipt's verify button: checks, in this browser, the checkpoint's
// Ed25519 signature under the log key shown on the page (a C2SP signed
// note) and each ledger entry's RFC 6962 inclusion proof against the
// checkpoint's root, with WebCrypto (SHA-256, Ed25519). It stops at the
// first check that fails and names it. It reads the page and changes
// nothing but the page.
'use strict';

(function () {
  const button = document.getElementById('verify');
  const result = document.getElementById('verify-result');
  const log = document.getElementById('log');
  if (!button || !result || !log) {
    return;
  }

  const fromBase64 = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  const utf8 = (s) => new TextEncoder().encode(s);
  const concat = (...parts) => {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  };
  const sha256 = async (...parts) =>
    new Uint8Array(await crypto.subtle.digest('SHA-256', concat(...parts)));
  const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
  const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

  class Stop extends Error {
    constructor(message, element) {
      super(message);
      this.element = element;
    }
  }

  // c2sp.org/signed-note: the body is everything up to and including the
  // newline before the blank line; each signature line is
  // "\u2014 <name> <base64(key id (4) || signature (64))>".
  async function checkNote(noteText, keyText) {
    // name+<8 hex>+base64: the name holds no '+', the base64 may.
    const m = /^([^+\s]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/]+=*)$/.exec(keyText || '');
    if (!m) {
      throw new Stop('the log key is missing or not name+id+key');
    }
    const [, name, idHex, keyB64] = m;
    const key = fromBase64(keyB64);
    if (key.length !== 33 || key[0] !== 1) {
      throw new Stop('the log key is not an Ed25519 note key');
    }
    const expectedId = toHex((await sha256(utf8(name), utf8('\n'), key)).slice(0, 4));
    if (expectedId !== idHex) {
      throw new Stop('the log key\u2019s id does not match its name and key');
    }
    const split = noteText.indexOf('\n\n');
    if (split < 0) {
      throw new Stop('the checkpoint is not a signed note');
    }
    const body = noteText.slice(0, split + 1);
    const lines = noteText.slice(split + 2).split('\n').filter((l) => l.length > 0);
    const publicKey = await crypto.subtle.importKey(
      'raw', key.slice(1), { name: 'Ed25519' }, false, ['verify']);
    let verified = false;
    for (const line of lines) {
      const m = /^\u2014 (\S+) (\S+)$/.exec(line);
      if (!m || m[1] !== name) {
        continue;
      }
      const sig = fromBase64(m[2]);
      if (sig.length !== 68 || toHex(sig.slice(0, 4)) !== idHex) {
        continue;
      }
      if (await crypto.subtle.verify({ name: 'Ed25519' }, publicKey, sig.slice(4), utf8(body))) {
        verified = true;
      }
    }
    if (!verified) {
      throw new Stop('the checkpoint\u2019s signature does not verify under the log key ' + name);
    }
    const [origin, size, root] = body.split('\n');
    if (origin !== name) {
      throw new Stop('the checkpoint\u2019s origin ' + origin + ' is not the key\u2019s name ' + name);
    }
    if (!/^[0-9]+$/.test(size)) {
      throw new Stop('the checkpoint\u2019s size is not a number');
    }
    return { origin, size: Number(size), root: fromBase64(root) };
  }

  // RFC 9162, 2.1.3.2: the root an inclusion path leads to.
  async function rootOf(leaf, index, size, path) {
    if (index >= size) {
      return null;
    }
    let fn = index;
    let sn = size - 1;
    let r = leaf;
    for (const p of path) {
      if (sn === 0) {
        return null;
      }
      if (fn % 2 === 1 || fn === sn) {
        r = await sha256(Uint8Array.of(1), p, r);
        if (fn % 2 === 0) {
          while (fn % 2 === 0 && fn !== 0) {
            fn = Math.floor(fn / 2);
            sn = Math.floor(sn / 2);
          }
        }
      } else {
        r = await sha256(Uint8Array.of(1), r, p);
      }
      fn = Math.floor(fn / 2);
      sn = Math.floor(sn / 2);
    }
    return sn === 0 ? r : null;
  }

  async function verify() {
    const entries = Array.from(document.querySelectorAll('li.entry'));
    for (const li of entries) {
      li.classList.remove('ok', 'bad');
      li.querySelector('.verdict').textContent = '';
    }
    if (!window.crypto || !crypto.subtle) {
      throw new Stop('this browser has no WebCrypto here (it needs https or localhost)');
    }
    const noteB64 = log.dataset.note;
    if (!noteB64) {
      throw new Stop('no signed checkpoint covers these entries yet');
    }
    const checkpoint = await checkNote(new TextDecoder().decode(fromBase64(noteB64)), log.dataset.key);
    if (entries.length === 0) {
      throw new Stop('the request has no ledger entry');
    }
    for (const li of entries) {
      const seq = Number(li.dataset.seq);
      const label = 'entry #' + seq + ' (' + li.dataset.kind + ')';
      if (li.dataset.proved !== 'yes') {
        throw new Stop(label + ' has no inclusion proof', li);
      }
      const path = li.dataset.path ? li.dataset.path.split(' ').map(fromBase64) : [];
      const leaf = await sha256(Uint8Array.of(0), fromBase64(li.dataset.bytes));
      const root = await rootOf(leaf, seq - 1, checkpoint.size, path);
      if (root === null || !same(root, checkpoint.root)) {
        throw new Stop(label + ': its inclusion proof does not reach the signed root of '
          + checkpoint.origin + ' at size ' + checkpoint.size, li);
      }
      li.classList.add('ok');
      li.querySelector('.verdict').textContent = '\u2713 included';
    }
    return 'Verified: the checkpoint of ' + checkpoint.origin + ' (size ' + checkpoint.size
      + ') is signed by its log key, and all ' + entries.length
      + ' entries are included in it.';
  }

  button.addEventListener('click', () => {
    result.className = 'checking';
    result.textContent = 'Checking\u2026';
    verify().then((message) => {
      result.className = 'verified';
      result.textContent = message;
    }, (e) => {
      result.className = 'failed';
      result.textContent = 'Stopped: ' + (e instanceof Stop ? e.message : String(e));
      if (e instanceof Stop && e.element) {
        e.element.classList.add('bad');
        e.element.querySelector('.verdict').textContent = '\u2717 stopped here';
        e.element.scrollIntoView({ block: 'center' });
      }
    });
  });
})();
