import { NativeModel } from '../backend/native-addon';

const cache = new WeakMap<NativeModel, Map<string, number[]>>();

/**
 * Per capital letter A-Z, the tokens that write it alone, bare or after one
 * space ("A", " A", a SentencePiece "▁A", a byte token 0x41): how an answer
 * that is that letter begins. Read from the vocabulary once per model.
 */
export function letterTokens(model: NativeModel): Map<string, number[]> {
  const known = cache.get(model);
  if (known) return known;
  const map = new Map<string, number[]>();
  for (let c = 65; c <= 90; c++) map.set(String.fromCharCode(c), []);
  const n = model.info.nVocab;
  for (let id = 0; id < n; id++) {
    const piece = model.tokenToPiece(id, false);
    if (piece.length === 0 || piece.length > 2) continue;
    const m = /^ ?([A-Z])$/.exec(piece.toString('latin1'));
    if (m) map.get(m[1])!.push(id);
  }
  cache.set(model, map);
  return map;
}
