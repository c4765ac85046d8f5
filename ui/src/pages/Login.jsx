// The login page: a read, write or admin token in, a server-side session cookie out.
//
// The token goes in a POST body (never the URL) and is not kept by the page: the server
// answers with an HttpOnly session cookie, which the page cannot read either.

import { useState } from "preact/hooks";
import { api } from "../api.js";

export function LoginPage({ onLogin }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const who = await api.login(token.trim());
      setToken("");
      onLogin(who);
    } catch (err) {
      setError(err.status === 401 ? "That token is not valid (revoked, or mistyped)." : err.message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="page login">
      <h1>Log in to rankwise</h1>
      <p class="muted">
        Paste a <b>read</b>, <b>write</b> (read and edit reports and runs) or <b>admin</b> token.
        An admin creates one with <code>rankwise token create --db URL --role read</code>.
      </p>
      <form onSubmit={submit} class="login-form">
        <label for="rk-token">Token</label>
        <input
          id="rk-token"
          name="token"
          type="password"
          autocomplete="off"
          spellcheck={false}
          placeholder="rk_r_…"
          value={token}
          onInput={(e) => setToken(e.currentTarget.value)}
        />
        <button type="submit" disabled={busy || !token.trim()}>Log in</button>
      </form>
      {error ? <p class="error" role="alert">{error}</p> : null}
    </main>
  );
}
