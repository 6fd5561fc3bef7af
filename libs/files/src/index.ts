export * from './file-names';
export * from './workspace-files.service';
export * from './files.module';
