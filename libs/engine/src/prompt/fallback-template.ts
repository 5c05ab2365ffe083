/**
 * The chat template used for models that ship none (base models such as
 * stories260K): plain "role: content" lines, then "assistant:" to answer. It
 * keeps chat usable on a completion model without inventing special tokens.
 * Content that starts with a space (what the model wrote after "assistant:")
 * gets no second one, so a past reply renders as the tokens that produced it.
 */
export const FALLBACK_CHAT_TEMPLATE =
  "{%- for message in messages -%}" +
  "{{ message['role'] }}:{{ message['content'] if message['content'].startswith(' ') else ' ' + message['content'] }}\n" +
  "{%- endfor -%}" +
  "{%- if add_generation_prompt -%}assistant:{%- endif -%}";
