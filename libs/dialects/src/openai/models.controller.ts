import { Controller, Get, Inject, NotFoundException, Param } from '@nestjs/common';
import { ModelCatalog } from '../../../store/src/catalog';
import { sameModel } from '../../../store/src/model-names';
import { OpenAIService } from './openai.service';
import { modelEntry } from './rendering/model-entry';

/** GET /v1/models: every model the server could load (the same set as /api/tags). */
@Controller('v1/models')
export class ModelsController {
  constructor(
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    @Inject(OpenAIService) private readonly openai: OpenAIService,
  ) {}

  @Get()
  list(): unknown {
    return this.openai.models();
  }

  // Names may hold '/' (namespace/model:tag), hence the wildcard.
  @Get('*')
  one(@Param('*') name: string): unknown {
    const hit = this.catalog.list().find((e) => sameModel(e.name, name));
    if (!hit) throw new NotFoundException(`no model named ${name}`);
    return modelEntry(hit);
  }
}
