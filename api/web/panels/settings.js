// Settings (in the header): the API key, kept in localStorage and sent as
// Authorization: Bearer; and the Temporal UI's address for the links.

import { h } from '../dom.js';
import { settings, httpURL } from '../api.js';

export default {
  id: 'settings',
  inline: true,
  mount(root) {
    const key = h('input', { id: 'api-key', type: 'password', autocomplete: 'off', placeholder: 'API key (none)', value: settings.apiKey });
    const ui = h('input', { id: 'temporal-ui', placeholder: 'http://host:8233', value: localStorage.getItem('ctxflow.temporalUI') || '' });
    const save = (e) => {
      e.preventDefault();
      const addr = ui.value.trim();
      if (addr && !httpURL(addr)) {
        ui.setCustomValidity('an http:// or https:// address');
        ui.reportValidity();
        return;
      }
      settings.apiKey = key.value.trim();
      if (addr) localStorage.setItem('ctxflow.temporalUI', addr);
      else localStorage.removeItem('ctxflow.temporalUI');
      location.reload();
    };
    ui.addEventListener('input', () => ui.setCustomValidity(''));
    root.append(h('details.settings', {},
      h('summary', {}, settings.apiKey ? 'Settings · key set' : 'Settings'),
      h('form', { onsubmit: save },
        h('label', {}, 'API key', key),
        h('label', {}, 'Temporal UI', ui),
        h('button.primary', { id: 'save-settings', type: 'submit' }, 'Save'))));
  },
};
