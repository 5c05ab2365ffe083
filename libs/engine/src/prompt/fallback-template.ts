/**
 * The chat template used for models that ship none (base models such as
 * stories260K): plain "role: content" lines, then "assistant:" to answer. It
 * keeps chat usable on a completion model without inventing special tokens.
 */
export const FALLBACK_CHAT_TEMPLATE =
  "{%- for message in messages -%}" +
  "{{ message['role'] }}: {{ message['content'] }}\n" +
  "{%- endfor -%}" +
  "{%- if add_generation_prompt -%}assistant:{%- endif -%}";
