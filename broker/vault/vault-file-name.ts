/**
 * The vault's own file in a data directory: never the journal, so the journal can be shared for audit without it. Its
 * own module: `postern status` looks for it without loading the vault.
 */
export const vaultFileName = 'vault.sqlite';
