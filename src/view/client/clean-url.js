// Keeps credentials out of the address bar and this history entry: a login link's code (spent by now) or a token
// pasted into the URL. The server already redirects a good code away; this covers what is left (an error page).
{
  const url = new URL(location.href);
  if (url.searchParams.has('code') || url.searchParams.has('token')) {
    url.searchParams.delete('code');
    url.searchParams.delete('token');
    history.replaceState(history.state, '', url);
  }
}
