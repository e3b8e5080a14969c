/**
 * An RFC 9162 (Certificate Transparency v2) Merkle tree over the journal's rows, kept as a compact
 * range: the roots of the perfect subtrees covering leaves [0, size), largest first. Appending is
 * O(log n) amortized, the root is O(log n), and the whole state is at most 64 hashes, so the writer
 * stores it in one row and the verifier recomputes it from the leaves alone.
 *
 * Pure: the hash function comes in (SHA-256 in the journal and the verifier), so this file reads
 * no clock, does no I/O and holds no key.
 */
export type Hash = (data: Uint8Array) => Uint8Array;

export const merkleHashBytes = 32;
const leafPrefix = 0x00;
const nodePrefix = 0x01;

export interface MerkleFrontier {
  readonly size: number;
  /** Subtree roots, largest (leftmost) first; one per set bit of `size`. */
  readonly roots: readonly Uint8Array[];
}

export const emptyFrontier: MerkleFrontier = { size: 0, roots: [] };

/** MTH of one leaf: H(0x00 || leaf). */
export function leafHash(hash: Hash, leaf: Uint8Array): Uint8Array {
  const input = new Uint8Array(leaf.length + 1);
  input[0] = leafPrefix;
  input.set(leaf, 1);
  return hash(input);
}

/** An interior node: H(0x01 || left || right). */
export function nodeHash(hash: Hash, left: Uint8Array, right: Uint8Array): Uint8Array {
  const input = new Uint8Array(1 + left.length + right.length);
  input[0] = nodePrefix;
  input.set(left, 1);
  input.set(right, 1 + left.length);
  return hash(input);
}

/**
 * Adds one leaf hash. Merging equal-sized subtrees from the right is exactly the carry of a binary
 * increment, so after the merge `roots` again has one entry per set bit of the new size.
 */
export function appendLeaf(hash: Hash, frontier: MerkleFrontier, leaf: Uint8Array): MerkleFrontier {
  const roots = [...frontier.roots];
  let node = leaf;
  let size = frontier.size;
  while ((size & 1) === 1) {
    const left = roots.pop();
    if (left === undefined) throw new Error('frontier has fewer roots than its size says');
    node = nodeHash(hash, left, node);
    size = Math.floor(size / 2);
  }
  roots.push(node);
  return { size: frontier.size + 1, roots };
}

/**
 * The tree head MTH(D[0:size]): the subtree roots folded right to left, which is RFC 9162's split
 * at the largest power of two below n applied recursively. The empty tree's head is H() of nothing.
 */
export function frontierRoot(hash: Hash, frontier: MerkleFrontier): Uint8Array {
  const { roots } = frontier;
  let node = roots.at(-1);
  if (node === undefined) return hash(new Uint8Array(0));
  for (let i = roots.length - 2; i >= 0; i -= 1) node = nodeHash(hash, roots[i] as Uint8Array, node);
  return node;
}

/** The number of subtree roots a frontier of `size` leaves has (its popcount). */
export function frontierRootCount(size: number): number {
  let count = 0;
  for (let n = size; n > 0; n = Math.floor(n / 2)) count += n & 1;
  return count;
}

/** Frontier as stored: the roots concatenated (size is stored beside it). */
export function encodeFrontier(frontier: MerkleFrontier): Uint8Array {
  const out = new Uint8Array(frontier.roots.length * merkleHashBytes);
  frontier.roots.forEach((root, i) => out.set(root, i * merkleHashBytes));
  return out;
}

/** Returns undefined when the bytes cannot be the frontier of `size` leaves (hostile input). */
export function decodeFrontier(size: number, bytes: Uint8Array): MerkleFrontier | undefined {
  if (!Number.isSafeInteger(size) || size < 0) return undefined;
  if (bytes.length !== frontierRootCount(size) * merkleHashBytes) return undefined;
  const roots: Uint8Array[] = [];
  for (let i = 0; i < bytes.length; i += merkleHashBytes) roots.push(bytes.slice(i, i + merkleHashBytes));
  return { size, roots };
}

/** MTH computed directly from RFC 9162 §2.1.1's recursive definition; the reference in tests. */
export function rootOfLeaves(hash: Hash, leaves: readonly Uint8Array[]): Uint8Array {
  if (leaves.length === 0) return hash(new Uint8Array(0));
  if (leaves.length === 1) return leaves[0] as Uint8Array;
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return nodeHash(hash, rootOfLeaves(hash, leaves.slice(0, k)), rootOfLeaves(hash, leaves.slice(k)));
}
