{
  'targets': [
    {
      'target_name': 'peercred',
      'sources': ['src/peercred.c'],
      'cflags': ['-Wall', '-Wextra', '-O2'],
      # N-API only (no node-addon-api, no NAN): ABI-stable across Node and Electron versions.
      'defines': ['NAPI_VERSION=8'],
    },
  ],
}
