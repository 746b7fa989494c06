// npm-pick.mjs writes, into DIR, a package.json and a package-lock.json that
// hold only the named packages of the repository's package-lock.json and
// what they need (dependencies, optional dependencies, peers), at the very
// versions and integrities the lock pins, so that `npm ci` in DIR installs
// one CLI exactly as the tests use it and downloads nothing else. With no
// PACKAGE, every dependency of package.json: npm ci refuses the repository's
// own lock, which lacks other platforms' builds of an optional dependency
// that the registry npm reached did not have (Qwen Code's
// @teddyzhu/clipboard-darwin-*), and npm install would rewrite the lock.
//
// Usage: node scripts/npm-pick.mjs DIR [PACKAGE...]
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const [dir, ...args] = process.argv.slice(2);
if (!dir) {
  console.error("usage: node scripts/npm-pick.mjs DIR [PACKAGE...]");
  process.exit(2);
}
const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8"));
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const all = lock.packages;
const names = args.length ? args : Object.keys(pkg.dependencies);

// resolve finds the lock entry Node would load for dependency name when
// required from the package at path from (node_modules/a/node_modules/b…).
function resolve(from, name) {
  for (let p = from; ; ) {
    const key = (p ? p + "/" : "") + "node_modules/" + name;
    if (all[key]) return key;
    if (!p) return null;
    const i = p.lastIndexOf("/node_modules/");
    p = i < 0 ? "" : p.slice(0, i);
  }
}

const picked = new Set();
const missingOptional = [];
const queue = [];
const deps = {};
for (const name of names) {
  const version = pkg.dependencies?.[name];
  if (!version || !all["node_modules/" + name]) {
    console.error(`npm-pick: ${name} is not a dependency in package.json and package-lock.json`);
    process.exit(1);
  }
  deps[name] = version;
  queue.push("node_modules/" + name);
}
while (queue.length) {
  const key = queue.pop();
  if (picked.has(key)) continue;
  picked.add(key);
  const e = all[key];
  const wanted = { ...e.dependencies, ...e.optionalDependencies, ...e.peerDependencies };
  for (const name of Object.keys(wanted)) {
    const dep = resolve(key, name);
    if (dep) queue.push(dep);
    // An optional dependency for another platform may be absent from the
    // lock (npm could not record a build the registry it reached lacks);
    // it is left out of the entry, as npm would skip it on this platform.
    else if (e.optionalDependencies?.[name]) missingOptional.push([key, name]);
    else if (!e.optionalDependencies?.[name] && !e.peerDependenciesMeta?.[name]?.optional) {
      console.error(`npm-pick: ${key} needs ${name}, which package-lock.json lacks`);
      process.exit(1);
    }
  }
}

const manifest = { name: pkg.name + "-pick", private: true, dependencies: deps };
const packages = { "": { name: manifest.name, dependencies: deps } };
for (const key of [...picked].sort()) packages[key] = { ...all[key] };
for (const [key, name] of missingOptional) {
  const opt = { ...packages[key].optionalDependencies };
  delete opt[name];
  packages[key].optionalDependencies = opt;
}
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, "package.json"), JSON.stringify(manifest, null, 2) + "\n");
writeFileSync(join(dir, "package-lock.json"),
  JSON.stringify({ name: manifest.name, lockfileVersion: lock.lockfileVersion, requires: true, packages }, null, 2) + "\n");
