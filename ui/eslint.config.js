// ESLint for the dashboard (`npm run lint`, part of `make lint`): the JavaScript
// recommended rules, and the React hooks rules (Preact's hooks follow the same rules;
// `exhaustive-deps` is the one the data-loading hooks need checked).

import js from "@eslint/js";
import reactHooks from "eslint-plugin-react-hooks";
import globals from "globals";

export default [
  { ignores: ["node_modules/", "dist/"] },
  js.configs.recommended,
  reactHooks.configs.flat.recommended,
  {
    files: ["**/*.{js,jsx}"],
    languageOptions: {
      ecmaVersion: "latest",
      sourceType: "module",
      parserOptions: { ecmaFeatures: { jsx: true } },
      globals: { ...globals.browser },
    },
    rules: {
      // A missed dependency is a stale fetch or a stale chart: fail the lint, not warn.
      // useLoad takes `(load, deps)` like an effect: its callers' lists are checked too.
      "react-hooks/exhaustive-deps": ["error", { additionalHooks: "^useLoad$" }],
      // The rest of v7's recommended set checks code for the React Compiler (automatic
      // memoisation), which the dashboard does not use (Preact, built by Vite): they flag
      // the ordinary pattern of a ref written in a callback or effect (an in-flight
      // request, a scroll position) unless its name ends in "Ref".
      "react-hooks/immutability": "off",
      "react-hooks/refs": "off",
      "react-hooks/purity": "off",
      "react-hooks/set-state-in-effect": "off",
      // `const { zoom: _z, ...rest } = patch` drops a key on purpose.
      "no-unused-vars": ["error", { varsIgnorePattern: "^_", argsIgnorePattern: "^_", ignoreRestSiblings: true }],
    },
  },
  {
    files: ["test/**", "*.config.js"],
    languageOptions: { globals: { ...globals.node } },
  },
];
