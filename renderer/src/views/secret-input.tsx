import type { ClipboardEvent, DragEvent, InputHTMLAttributes, Ref } from 'react';

/** What a caller may set on a secret's field; its type and every store-related attribute are fixed here. */
export type SecretInputProps = Omit<
  InputHTMLAttributes<HTMLInputElement>,
  | 'type'
  | 'autoComplete'
  | 'spellCheck'
  | 'autoCapitalize'
  | 'autoCorrect'
  | 'value'
  | 'defaultValue'
  | 'className'
  | 'onCopy'
  | 'onCut'
  | 'onDragStart'
  | 'draggable'
> & { ref?: Ref<HTMLInputElement> };

/**
 * The field a person types a secret into: the vault passphrase, a sign-in code, a credential's secret. It is masked
 * like a password field but is not one, so a browser's password manager never offers to save what it holds: a
 * person who clicks "Save" on that offer puts the passphrase (or an API token) in the browser's password store,
 * which on Linux without a keyring is a file any process of the user opens (THREAT-MODEL 1 and 2). A text field
 * is instead what the browser's form history keeps, so `autocomplete="off"` is fixed here too: without it Chromium
 * writes the typed value into its profile's `Web Data` in plain text at submit (e2e/secret-fields.e2e.ts performs
 * both). Password managers that read the page (extensions) are asked to skip it; copying, cutting or dragging its
 * text out is refused, as a password field refuses them (a drag would drop the secret, unmasked, into another field or
 * program). Always uncontrolled: the value is read and cleared by the submit, never React state.
 */
export function SecretInput({ ref, ...props }: SecretInputProps) {
  const refuse = (event: ClipboardEvent<HTMLInputElement> | DragEvent<HTMLInputElement>) => event.preventDefault();
  return (
    <input
      {...props}
      ref={ref}
      type="text"
      className="secret-input"
      autoComplete="off"
      autoCapitalize="off"
      autoCorrect="off"
      spellCheck={false}
      data-secret-field=""
      data-1p-ignore=""
      data-lpignore="true"
      data-bwignore=""
      data-form-type="other"
      onCopy={refuse}
      onCut={refuse}
      onDragStart={refuse}
      draggable={false}
    />
  );
}
