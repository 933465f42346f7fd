// A real OpenID Provider for the sign-in tests: panva's oidc-provider (npm, pinned in
// package-lock.json, installed into .local/oidc by infra/setup-oidc.sh), configured from JSON and
// served on 127.0.0.1. tests/support/oidc.rs starts it and drives its own login and consent pages.
//
//   node infra/oidc/provider.mjs [PORT] [CONFIG_JSON] [--exit-with-stdin]
//
// PORT: 0 (the default) for any free port. CONFIG_JSON, or else the env var OIDC_TEST_CONFIG:
//   {"clients": [{"client_id", "client_secret", "redirect_uris": [...], ...more client metadata}],
//    "accounts": [{"sub", "email", "email_verified"}],
//    "keys": [private JWK, ...]}                      (optional; default: one fresh RS256 key)
// Clients are registered with token_endpoint_auth_method client_secret_basic unless their entry
// says otherwise; oidc-provider takes a secret by either client_secret_basic or client_secret_post
// from any client that has one. PKCE (S256) is required of every client.
// Login on the provider's own page (devInteractions): an account's sub or its email, any
// password. A login that names no account signs in as the subject of that name, with no email
// claims (the provider's own dev login does the same).
// ID tokens carry the email scope's claims (conformIdTokenClaims: false), as Google, Okta and
// Entra issue them.
//
// Prints exactly one line to stdout, `listening on http://127.0.0.1:<port>` (the issuer), then
// only errors, to stderr. With --exit-with-stdin it exits when its stdin closes, so it never
// outlives the test process that started it. OIDC_NODE_MODULES names the node_modules to load
// oidc-provider from (default: <repo>/.local/oidc/node_modules).
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const modules = process.env.OIDC_NODE_MODULES || join(here, '..', '..', '.local', 'oidc', 'node_modules');

function die(message) {
  process.stderr.write(`provider.mjs: ${message}\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
const exitWithStdin = args.includes('--exit-with-stdin');
const [portArg = '0', configArg = process.env.OIDC_TEST_CONFIG] = args.filter((a) => a !== '--exit-with-stdin');
const port = Number(portArg);
if (!Number.isInteger(port) || port < 0 || port > 65535) die(`not a port: ${portArg}`);
if (!configArg) die('no configuration: pass it as the second argument or in OIDC_TEST_CONFIG');
let config;
try {
  config = JSON.parse(configArg);
} catch (e) {
  die(`the configuration is not JSON: ${e.message}`);
}
const clients = config.clients ?? [];
const accounts = config.accounts ?? [];

// The package's own notices and warnings (an unsupported Node.js version, devInteractions being
// for development, default TTLs) are expected here: kept off stdout and stderr.
for (const method of ['info', 'warn']) {
  const original = console[method];
  console[method] = (...a) => {
    if (typeof a[0] === 'string' && /^oidc-provider (NOTICE|WARNING):/.test(a[0])) return;
    original(...a);
  };
}

let Provider;
try {
  const entry = createRequire(join(modules, 'noop.js')).resolve('oidc-provider');
  ({ default: Provider } = await import(pathToFileURL(entry).href));
} catch (e) {
  die(`cannot load oidc-provider from ${modules} (run infra/setup-oidc.sh, or make test): ${e.message}`);
}

function signingKey() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), alg: 'RS256', use: 'sig' };
}
const keys = config.keys?.length ? config.keys : [signingKey()];

const server = createServer();
server.on('error', (e) => die(`cannot listen on 127.0.0.1:${port}: ${e.message}`));
server.listen(port, '127.0.0.1', async () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: clients.map((c) => ({
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
      ...c,
    })),
    clientAuthMethods: ['client_secret_basic', 'client_secret_post'],
    async findAccount(_ctx, sub) {
      const account = accounts.find((a) => a.sub === sub) ?? { sub };
      return {
        accountId: sub,
        async claims() {
          const claims = { sub };
          if (account.email !== undefined) claims.email = account.email;
          if (account.email_verified !== undefined) claims.email_verified = account.email_verified;
          return claims;
        },
      };
    },
    claims: { openid: ['sub'], email: ['email', 'email_verified'] },
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
    jwks: { keys },
    cookies: { keys: ['countersign-test-oidc-cookie-key'] },
  });
  provider.on('server_error', (_ctx, err) => console.error('provider.mjs: server_error:', err));
  // The dev login page signs in as the login typed (its account id is the ID token's sub): a
  // login that is an account's email is turned into that account's sub before the provider
  // reads the form (it takes a body read upstream as req.body).
  const callback = provider.callback();
  server.on('request', async (req, res) => {
    if (req.method === 'POST' && /^\/interaction\/[^/?]+$/.test(req.url)) {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      const form = new URLSearchParams(Buffer.concat(chunks).toString());
      const login = form.get('login');
      const account = accounts.find((a) => a.email !== undefined && a.email === login);
      if (form.get('prompt') === 'login' && account) form.set('login', account.sub);
      req.body = form.toString();
    }
    callback(req, res);
  });
  // The clients' metadata is checked when first used: here, so a bad configuration fails the start.
  for (const { client_id: id } of clients) {
    try {
      if (!(await provider.Client.find(String(id)))) die(`client ${id}: not registered`);
    } catch (e) {
      die(`client ${id}: ${e.error_description ?? e.message}`);
    }
  }
  process.stdout.write(`listening on ${issuer}\n`);
});

if (exitWithStdin) {
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('error', () => process.exit(0));
  process.stdin.resume();
}
