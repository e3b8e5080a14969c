import { parseConfig } from '../config/index.js';
import { isCodedError } from '../contract/index.js';

/** The coded refusal parseConfig gives `text` (its code, field and message); throws if the text is accepted. */
export function configRefusal(text: string): { code: string; field: string | undefined; message: string } {
  try {
    parseConfig(text);
  } catch (error) {
    if (isCodedError(error)) return { code: error.code, field: error.field, message: error.message };
    throw error;
  }
  throw new Error('expected the configuration to be refused');
}
