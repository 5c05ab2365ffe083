import { Controller, Get, Inject, NotFoundException, Param } from '@nestjs/common';
import { ModelCatalog, CatalogEntry } from '../../../store/src/catalog';
import { sameModel } from '../../../store/src/model-names';

/** GET /v1/models: every model the server could load (the same set as /api/tags). */
@Controller('v1/models')
export class ModelsController {
  constructor(@Inject(ModelCatalog) private readonly catalog: ModelCatalog) {}

  @Get()
  list(): unknown {
    return { object: 'list', data: this.catalog.list().map(modelEntry) };
  }

  // Names may hold '/' (namespace/model:tag), hence the wildcard.
  @Get('*')
  one(@Param('*') name: string): unknown {
    const hit = this.catalog.list().find((e) => sameModel(e.name, name));
    if (!hit) throw new NotFoundException(`no model named ${name}`);
    return modelEntry(hit);
  }
}

export function modelEntry(e: CatalogEntry): Record<string, unknown> {
  return {
    id: e.name,
    object: 'model',
    created: Math.floor(e.modifiedAt.getTime() / 1000),
    owned_by: e.source === 'ollama' ? 'ollama' : 'svc',
    capabilities: e.capabilities,
  };
}
